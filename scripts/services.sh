#!/usr/bin/env bash
# services.sh: make sure the services the integration tests use are running
# on 127.0.0.1, installing them from Debian's packages if they are missing
# (and the browser the monitor page's test drives, iproute2 for the
# network namespaces of TestJavaIPNetns, Prometheus and promtool for the
# tests of deploy/'s rules and dashboard, and Galera and rsync for the
# clusters internal/testutil starts), and print the environment the tests
# read:
#
#   eval "$(scripts/services.sh)"
#   LEAF_TEST_STRICT=1 go test -race ./...
#
# Idempotent: a service that already answers is left alone. Progress goes to
# stderr; stdout carries only `export NAME=value` lines. Name services to
# ensure only those: scripts/services.sh mariadb zookeeper
# (mariadb, postgres, zookeeper, etcd, chromium, iproute2, prometheus,
# galera).
set -euo pipefail

# Everything below writes to stderr; the export lines go to the saved stdout.
exec 3>&1 1>&2

readonly WAIT_SECONDS=60
readonly MYSQL_DSN='root@tcp(127.0.0.1:3306)/'
readonly POSTGRES_DSN='postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable'

log() { printf 'services: %s\n' "$*"; }
die() { printf 'services: error: %s\n' "$*"; exit 1; }

# as_root runs a command as root, through sudo when we are not root.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	elif command -v sudo >/dev/null; then
		sudo "$@"
	else
		die "need root to run: $*"
	fi
}

apt_updated=
apt_install() {
	if [ -z "$apt_updated" ]; then
		log "apt-get update"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
		apt_updated=1
	fi
	log "apt-get install $*"
	# Package scripts may try to start the services and fail without systemd;
	# we start them ourselves below.
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

# wait_for NAME CMD...: retry CMD once a second, at most WAIT_SECONDS.
wait_for() {
	local name=$1 i
	shift
	for ((i = 0; i < WAIT_SECONDS; i++)); do
		if "$@" >/dev/null 2>&1; then
			return 0
		fi
		sleep 1
	done
	die "$name did not accept connections within ${WAIT_SECONDS}s"
}

# ---------------------------------------------------------------- MariaDB

mysql_up() { mysqladmin ping -h127.0.0.1 -P3306 --connect-timeout=2 --silent; }
# mysqladmin ping succeeds even when access is denied, so check a login too.
mysql_root_ok() { mariadb -h127.0.0.1 -P3306 -uroot --connect-timeout=2 -e 'SELECT 1'; }

ensure_mariadb() {
	if mysql_up >/dev/null 2>&1; then
		log "MariaDB answers on 127.0.0.1:3306"
	else
		if [ ! -x /usr/sbin/mariadbd ]; then
			apt_install mariadb-server mariadb-client
		fi
		if [ ! -d /var/lib/mysql/mysql ]; then
			log "initialising the MariaDB data directory"
			as_root mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
		fi
		log "starting MariaDB"
		as_root install -d -o mysql -g mysql /run/mysqld
		as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
		wait_for MariaDB mysql_up
		log "MariaDB is up"
	fi
	if ! mysql_root_ok >/dev/null 2>&1; then
		# Debian's root logs in through the Unix socket only; let it log in
		# over TCP from 127.0.0.1 with an empty password as well. Both
		# host names are needed: with skip-name-resolve 127.0.0.1 does not
		# match localhost.
		log "allowing root@127.0.0.1 with an empty password"
		as_root mariadb --protocol=socket -uroot <<-'SQL'
			CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
			GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
			ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
			FLUSH PRIVILEGES;
		SQL
		wait_for "MariaDB root login" mysql_root_ok
	fi
}

# ------------------------------------------------------------- PostgreSQL

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q; }
pg_login_ok() { psql -h 127.0.0.1 -p 5432 -U postgres -w -d postgres -Atc 'SELECT 1'; }
pg_version() { ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1 || true; }

ensure_postgres() {
	if pg_up >/dev/null 2>&1; then
		log "PostgreSQL answers on 127.0.0.1:5432"
	else
		if [ -z "$(pg_version)" ] || ! command -v pg_ctlcluster >/dev/null; then
			apt_install postgresql postgresql-client
		fi
		local v
		v=$(pg_version)
		[ -n "$v" ] || die "PostgreSQL is installed but has no cluster in /etc/postgresql"
		if [ ! -d "/etc/postgresql/$v/main" ]; then
			log "creating PostgreSQL cluster $v/main"
			as_root pg_createcluster "$v" main
		fi
		log "starting PostgreSQL $v"
		as_root pg_ctlcluster --skip-systemctl-redirect "$v" main start || true
		wait_for PostgreSQL pg_up
		log "PostgreSQL is up"
	fi
	if ! pg_login_ok >/dev/null 2>&1; then
		local v hba
		v=$(pg_version)
		hba=/etc/postgresql/$v/main/pg_hba.conf
		[ -f "$hba" ] || die "cannot log in as postgres on 127.0.0.1 and found no $hba to fix"
		log "trusting local TCP logins in $hba"
		# pg_hba.conf is read top-down: the first matching line wins.
		as_root sed -i -e '1i host all all 127.0.0.1/32 trust' -e '1i host all all ::1/128 trust' "$hba"
		as_root pg_ctlcluster --skip-systemctl-redirect "$v" main reload
		wait_for "PostgreSQL login" pg_login_ok
	fi
}

# -------------------------------------------------------------- ZooKeeper
# Debian's package ships no service we can use without systemd and a config
# that opens the admin server on 8080 (leaf's own port), so we run the server
# class ourselves with a config of our own: loopback only, no admin server,
# a 500 ms tick so tests may ask for sessions as short as 1 s.

readonly ZK_DIR=/var/lib/leaf-test-zookeeper
zk_up() { exec 3<>/dev/tcp/127.0.0.1/2181 && printf ruok >&3 && [ "$(head -c 4 <&3)" = imok ]; }

ensure_zookeeper() {
	if (zk_up) >/dev/null 2>&1; then
		log "ZooKeeper answers on 127.0.0.1:2181"
		return
	fi
	if [ ! -f /usr/share/java/zookeeper.jar ]; then
		apt_install zookeeper
	fi
	as_root install -d "$ZK_DIR" "$ZK_DIR/data"
	as_root tee "$ZK_DIR/zoo.cfg" >/dev/null <<-EOF_CFG
		tickTime=500
		initLimit=10
		syncLimit=5
		dataDir=$ZK_DIR/data
		clientPort=2181
		clientPortAddress=127.0.0.1
		admin.enableServer=false
		minSessionTimeout=1000
		maxSessionTimeout=30000
		4lw.commands.whitelist=ruok,srvr
	EOF_CFG
	log "starting ZooKeeper"
	as_root start-stop-daemon --start --oknodo --background --make-pidfile \
		--pidfile "$ZK_DIR/zookeeper.pid" --chdir "$ZK_DIR" --output "$ZK_DIR/zookeeper.log" \
		--exec /usr/bin/java -- -Dzookeeper.log.dir="$ZK_DIR" -Dzookeeper.root.logger=INFO,CONSOLE \
		-cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar \
		org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZK_DIR/zoo.cfg"
	wait_for ZooKeeper bash -c "$(declare -f zk_up); zk_up"
	log "ZooKeeper is up"
}

# ------------------------------------------------------------------- etcd

readonly ETCD_DIR=/var/lib/leaf-test-etcd
etcd_up() { curl -fsS --max-time 2 http://127.0.0.1:2379/health | grep -q '"health":"true"'; }

ensure_etcd() {
	if etcd_up >/dev/null 2>&1; then
		log "etcd answers on 127.0.0.1:2379"
		return
	fi
	if [ ! -x /usr/bin/etcd ]; then
		apt_install etcd-server
	fi
	as_root install -d "$ETCD_DIR"
	log "starting etcd"
	as_root start-stop-daemon --start --oknodo --background --make-pidfile \
		--pidfile "$ETCD_DIR/etcd.pid" --chdir "$ETCD_DIR" --output "$ETCD_DIR/etcd.log" \
		--exec /usr/bin/etcd -- --name leaf-test --data-dir "$ETCD_DIR/data" \
		--listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster leaf-test=http://127.0.0.1:2380
	wait_for etcd etcd_up
	log "etcd is up"
}

# --------------------------------------------------------------- Chromium
# Not a service: the browser that the monitor page's test (e2e/browser)
# drives, headless.

readonly CHROMIUM=/usr/bin/chromium

ensure_chromium() {
	if [ -x "$CHROMIUM" ]; then
		log "Chromium is installed at $CHROMIUM"
		return
	fi
	apt_install chromium
	[ -x "$CHROMIUM" ] || die "installed chromium, but there is no $CHROMIUM"
}

# --------------------------------------------------------------- iproute2
# Not a service: `ip netns`, with which cmd/leaf's TestJavaIPNetns builds
# network namespaces to check the default snowflake IP on real interfaces.

ensure_iproute2() {
	if command -v ip >/dev/null; then
		log "ip (iproute2) is installed"
		return
	fi
	apt_install iproute2
	command -v ip >/dev/null || die "installed iproute2, but there is no ip command"
}

# ------------------------------------------------------------- Prometheus
# Not a service either: the deploy package's tests check and unit-test the
# rules with promtool, and run the prometheus binary themselves, on a port
# and data directory of their own, to scrape a real leaf server.

readonly PROMETHEUS=/usr/bin/prometheus
readonly PROMTOOL=/usr/bin/promtool

ensure_prometheus() {
	if [ -x "$PROMETHEUS" ] && [ -x "$PROMTOOL" ]; then
		log "Prometheus is installed at $PROMETHEUS"
		return
	fi
	apt_install prometheus
	[ -x "$PROMETHEUS" ] && [ -x "$PROMTOOL" ] || die "installed prometheus, but there is no $PROMETHEUS or $PROMTOOL"
	# The package starts its own server on :9090 where it can (systemd, or
	# its init script when no policy-rc.d forbids it). The tests do not use
	# it, and it would keep scraping and writing to /var/lib/prometheus, so
	# stop the one this install started and keep it from coming back.
	if [ -d /run/systemd/system ]; then
		as_root systemctl disable --now prometheus.service || true
	elif [ -x /etc/init.d/prometheus ]; then
		as_root /etc/init.d/prometheus stop || true
		as_root update-rc.d prometheus disable >/dev/null 2>&1 || true
	fi
}

# ----------------------------------------------------------------- Galera
# Not a service either: internal/testutil's NewGalera starts clusters of its
# own, each node a mariadbd on ports and in a directory of the test's, and
# kills them at the test's end. It needs the Galera provider, and rsync and
# mariadb-server's wsrep_sst_rsync, with which a joining node copies a
# donor's data; the nodes run as mariadb-server's mysql user.

readonly GALERA_PROVIDER=/usr/lib/galera/libgalera_smm.so

ensure_galera() {
	local missing=()
	[ -f "$GALERA_PROVIDER" ] || missing+=(galera-4)
	command -v rsync >/dev/null || missing+=(rsync)
	if [ ! -x /usr/sbin/mariadbd ] || ! command -v wsrep_sst_rsync >/dev/null; then
		missing+=(mariadb-server)
	fi
	if [ ${#missing[@]} -eq 0 ]; then
		log "Galera ($GALERA_PROVIDER) and rsync are installed"
		return
	fi
	apt_install "${missing[@]}"
	[ -f "$GALERA_PROVIDER" ] && command -v rsync >/dev/null && command -v wsrep_sst_rsync >/dev/null ||
		die "installed ${missing[*]}, but there is no $GALERA_PROVIDER, rsync or wsrep_sst_rsync"
}

# Arguments name the services to ensure, and only their variables are
# printed: scripts/cluster.sh needs MariaDB and ZooKeeper, and nothing else
# installed. None: everything the tests use.
[ $# -gt 0 ] || set -- mariadb postgres zookeeper etcd chromium iproute2 prometheus galera
for service in "$@"; do
	case $service in
	mariadb)
		ensure_mariadb
		printf "export LEAF_TEST_MYSQL_DSN='%s'\n" "$MYSQL_DSN" >&3
		;;
	postgres)
		ensure_postgres
		printf "export LEAF_TEST_POSTGRES_DSN='%s'\n" "$POSTGRES_DSN" >&3
		;;
	zookeeper)
		ensure_zookeeper
		printf "export LEAF_TEST_ZK='%s'\n" 127.0.0.1:2181 >&3
		;;
	etcd)
		ensure_etcd
		printf "export LEAF_TEST_ETCD='%s'\n" 127.0.0.1:2379 >&3
		;;
	chromium)
		ensure_chromium
		printf "export LEAF_TEST_CHROMIUM='%s'\n" "$CHROMIUM" >&3
		;;
	iproute2) ensure_iproute2 ;;
	galera) ensure_galera ;;
	prometheus)
		ensure_prometheus
		printf "export LEAF_TEST_PROMETHEUS='%s'\n" "$PROMETHEUS" >&3
		printf "export LEAF_TEST_PROMTOOL='%s'\n" "$PROMTOOL" >&3
		;;
	*)
		printf 'services: unknown service %s (mariadb, postgres, zookeeper, etcd, chromium, iproute2, prometheus, galera)\n' "$service"
		exit 2
		;;
	esac
done
