package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/grpcapi/leafv1"
	"github.com/leafgo/leaf/internal/testutil"
)

const serveToken = "serve-admin-token-0123456789"

// TestServeRefusesExposedAdmin: without a token, serve refuses a listen
// address other hosts can reach unless told --insecure-admin; with one, the
// admin routes need it.
func TestServeRefusesExposedAdmin(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		r := runCLI(t, dataEnv(t), "serve", "--listen", listen)
		if r.code != 2 || !strings.Contains(r.stderr, "listen "+listen+" is reachable from other hosts and no admin token is set") ||
			!strings.Contains(r.stderr, "--insecure-admin") {
			t.Errorf("serve --listen %s without a token: exit %d, stderr %q; want 2 and the way out", listen, r.code, r.stderr)
		}
	}
	// Told to, it serves, and says so in its log. (--single-node: the
	// defaults' IDs are node-local, see TestServeSingleNode.)
	s := serveInProcess(t, dataEnv(t), "--listen", "0.0.0.0:0", "--insecure-admin", "--single-node")
	if !strings.Contains(s.Log.String(), "tag administration is open to anyone who reaches the port") {
		t.Errorf("no warning logged:\n%s", s.Log.String())
	}
	port := s.Addr[strings.LastIndex(s.Addr, ":"):]
	if code, body := testutil.Get(t, "http://127.0.0.1"+port+"/v2/tags"); code != 200 {
		t.Errorf("GET /v2/tags with --insecure-admin: %d %s", code, body)
	}

	// With a token from the environment or a file, it serves and the admin
	// routes want the token.
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(serveToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, env := range map[string][]string{
		"env":  append(dataEnv(t), "LEAF_ADMIN_TOKEN="+serveToken),
		"file": append(dataEnv(t), "LEAF_ADMIN_TOKEN_FILE="+tokenFile),
	} {
		s := serveInProcess(t, env, "--listen", "0.0.0.0:0", "--single-node")
		base := "http://127.0.0.1" + s.Addr[strings.LastIndex(s.Addr, ":"):]
		if code, _ := testutil.Get(t, base+"/v2/tags"); code != 401 {
			t.Errorf("%s: GET /v2/tags without the token: %d, want 401", name, code)
		}
		req, _ := http.NewRequest("GET", base+"/v2/tags", nil)
		req.Header.Set("Authorization", "Bearer "+serveToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: GET /v2/tags with the token: %d", name, resp.StatusCode)
		}
		if code, _ := testutil.Get(t, base+"/api/segment/get/"+config.SeedTag); code != 200 {
			t.Errorf("%s: an ID route wanted the token: %d", name, code)
		}
	}

	// A bad token is a configuration error that does not quote the token.
	r := runCLI(t, append(dataEnv(t), "LEAF_ADMIN_TOKEN=short-secret"), "serve", "--listen", "127.0.0.1:0")
	if r.code != 2 || !strings.Contains(r.stderr, "admin.token (from LEAF_ADMIN_TOKEN): too short") || strings.Contains(r.stderr, "short-secret") {
		t.Errorf("short token: exit %d, stderr %q", r.code, r.stderr)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and
// returns their paths and a pool trusting the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "leaf test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestServeTLS: --tls-cert/--tls-key put HTTP and gRPC behind TLS, and
// nothing answers in the clear.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := selfSigned(t, t.TempDir())
	s := serveInProcess(t, dataEnv(t), "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0",
		"--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.Contains(s.Log.String(), "tls=true") {
		t.Errorf("the listening line does not say TLS:\n%s", s.Log.String())
	}

	tlsClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	var last int64
	for i := range 3 {
		resp, err := tlsClient.Get("https://" + s.Addr + "/api/segment/get/" + config.SeedTag)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var id int64
		if _, err := fmt.Sscan(string(body), &id); err != nil || resp.StatusCode != 200 || id <= last {
			t.Fatalf("HTTPS request %d: %d %q", i, resp.StatusCode, body)
		}
		if resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
			t.Errorf("connection state %+v", resp.TLS)
		}
		last = id
	}
	// The admin and page routes go over TLS too.
	if resp, err := tlsClient.Get("https://" + s.Addr + "/v2/status"); err != nil || resp.StatusCode != 200 {
		t.Errorf("HTTPS /v2/status: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// Plain HTTP to the TLS port gets no ID.
	plain := &http.Client{Timeout: 5 * time.Second}
	if resp, err := plain.Get("http://" + s.Addr + "/api/segment/get/" + config.SeedTag); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP on the TLS port answered 200 %q", body)
		}
	}
	// TLS 1.1 is refused.
	old := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Get("https://" + s.Addr + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("a TLS 1.1 client was served")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn := grpcConn(t, s, credentials.NewTLS(&tls.Config{RootCAs: pool}))
	r, err := leafv1.NewLeafClient(conn).NextID(ctx, &leafv1.NextIDRequest{Tag: config.SeedTag})
	if err != nil || r.GetId() != last+1 {
		t.Errorf("gRPC over TLS: %v, %v; want ID %d", r, err, last+1)
	}
	clear := grpcConn(t, s, insecure.NewCredentials())
	shortCtx, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if _, err := leafv1.NewLeafClient(clear).NextID(shortCtx, &leafv1.NextIDRequest{Tag: config.SeedTag}); err == nil {
		t.Error("gRPC without TLS was served")
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d: %s", code, s.Log.String())
	}
}

func TestServeTLSErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certFile, keyFile, _ := selfSigned(t, dir)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tls-cert", certFile}, 2, "tls: tls.cert and tls.key go together"},
		{[]string{"--tls-key", keyFile}, 2, "tls: tls.cert and tls.key go together"},
		// A file to fix is a usage error, as a missing token file is; one
		// that cannot be read is not.
		{[]string{"--tls-cert", filepath.Join(dir, "missing.pem"), "--tls-key", keyFile}, 2, "load TLS certificate"},
		{[]string{"--tls-cert", garbage, "--tls-key", keyFile}, 2, "load TLS certificate " + garbage},
		{[]string{"--tls-cert", keyFile, "--tls-key", certFile}, 2, "load TLS certificate"},
		{[]string{"--tls-cert", dir, "--tls-key", keyFile}, 1, "load TLS certificate " + dir},
	}
	for _, tt := range tests {
		r := runCLI(t, dataEnv(t), append([]string{"serve", "--listen", "127.0.0.1:0"}, tt.args...)...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want %d and %q", tt.args, r.code, r.stderr, tt.code, tt.want)
		}
	}
}

// TestServeRateLimit: --rate-limit bounds one client's ID requests with the
// real limiter; the refused requests get 429 and Retry-After and take no ID.
func TestServeRateLimit(t *testing.T) {
	t.Parallel()
	s := serveInProcess(t, append(dataEnv(t), "LEAF_RATE_LIMIT_BURST=5"), "--listen", "127.0.0.1:0", "--rate-limit", "1",
		"--grpc-listen", "127.0.0.1:0")
	var ok, limited int
	var last int64
	for range 8 {
		resp, err := http.Get(s.URL("/api/segment/get/" + config.SeedTag))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case 200:
			ok++
			var id int64
			fmt.Sscan(string(body), &id)
			if id != last+1 {
				t.Errorf("ID %d after %d: a refused request took IDs", id, last)
			}
			last = id
		case 429:
			limited++
			if ra := resp.Header.Get("Retry-After"); ra != "1" || !strings.Contains(string(body), "rate limit exceeded") {
				t.Errorf("429 with Retry-After %q and body %q", ra, body)
			}
		default:
			t.Errorf("status %d %q", resp.StatusCode, body)
		}
	}
	// 5 at once, and at most one more refilled while the loop ran.
	if ok < 5 || ok > 6 || ok+limited != 8 {
		t.Errorf("%d served, %d limited; want the burst of 5 (or 6) served", ok, limited)
	}
	// gRPC shares the client's bucket, now empty.
	conn := grpcConn(t, s, insecure.NewCredentials())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := leafv1.NewLeafClient(conn).NextID(ctx, &leafv1.NextIDRequest{Tag: config.SeedTag}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("gRPC NextID after the HTTP burst: %v, want ResourceExhausted", err)
	}
	// Status and probes are not limited.
	for _, p := range []string{"/v2/status", "/readyz", "/healthz"} {
		if code, _ := testutil.Get(t, s.URL(p)); code != 200 {
			t.Errorf("GET %s: %d", p, code)
		}
	}
}

// TestSecretsNeverLogged runs serve against MariaDB with a password in the
// DSN, an admin token and an opaque key, through start, requests (refused ones included), a
// store outage, a failed start and shutdown, at debug level in both log
// formats, and looks for any secret in everything it wrote.
func TestSecretsNeverLogged(t *testing.T) {
	t.Parallel()
	dsn := testutil.MySQL(t) // root@tcp(127.0.0.1:3306)/leaf_test_xxx
	rootDB, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer rootDB.Close()
	const password = "Pw-0f-the-store-9731"
	user := "leaf_sec_" + testutil.UniqueName()[len(testutil.UniqueName())-8:]
	dbName := dsn[strings.LastIndex(dsn, "/")+1:]
	if i := strings.IndexByte(dbName, '?'); i >= 0 {
		dbName = dbName[:i]
	}
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, password),
		fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", dbName, user),
	} {
		if _, err := rootDB.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { _, _ = rootDB.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })
	userDSN := fmt.Sprintf("%s:%s@tcp(127.0.0.1:3306)/%s", user, password, dbName)

	var logs []string
	for _, format := range []string{"text", "json"} {
		env := append(dataEnv(t), "LEAF_SEGMENT_STORE=mysql", "LEAF_SEGMENT_DSN="+userDSN, "LEAF_SEGMENT_SEED=true",
			"LEAF_ADMIN_TOKEN="+serveToken, "LEAF_SEGMENT_OPAQUE_KEY="+serveOpaqueKey, "LEAF_LOG_LEVEL=debug", "LEAF_LOG_FORMAT="+format)
		s := serveInProcess(t, env, "--listen", "127.0.0.1:0")
		testutil.Get(t, s.URL("/api/segment/get/"+config.SeedTag))
		testutil.Get(t, s.URL("/v2/tags"))
		// An opaque tag made, issued from and decoded, with the debug log on.
		create, _ := http.NewRequest("POST", s.URL("/v2/tags"), strings.NewReader(`{"tag":"secret.opaque","opaque_bits":40}`))
		create.Header.Set("Authorization", "Bearer "+serveToken)
		if resp, err := http.DefaultClient.Do(create); err != nil {
			t.Fatal(err)
		} else if resp.Body.Close(); resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusConflict {
			t.Fatalf("create the opaque tag: %d", resp.StatusCode)
		}
		if code, body := testutil.Get(t, s.URL("/api/segment/get/secret.opaque?count=5")); code != http.StatusOK {
			t.Fatalf("opaque IDs: %d %s\n%s", code, body, s.Log.String())
		}
		req, _ := http.NewRequest("GET", s.URL("/v2/tags"), nil)
		req.Header.Set("Authorization", "Bearer "+serveToken+"-wrong")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		// The store goes away: errors from the driver are logged.
		if _, err := rootDB.Exec(fmt.Sprintf("ALTER USER '%s'@'%%' ACCOUNT LOCK", user)); err != nil {
			t.Fatal(err)
		}
		killSessions(t, rootDB, user)
		for range 3 {
			testutil.Get(t, s.URL("/api/segment/get/"+config.SeedTag+"?count=1000"))
		}
		testutil.Get(t, s.URL("/readyz"))
		if _, err := rootDB.Exec(fmt.Sprintf("ALTER USER '%s'@'%%' ACCOUNT UNLOCK", user)); err != nil {
			t.Fatal(err)
		}
		s.Stop(t)
		logs = append(logs, s.Log.String())

		// A start that fails: wrong password, then a locked account.
		bad := runCLI(t, append(dataEnv(t), "LEAF_SEGMENT_STORE=mysql", "LEAF_ADMIN_TOKEN="+serveToken, "LEAF_SEGMENT_OPAQUE_KEY="+serveOpaqueKey, "LEAF_LOG_FORMAT="+format,
			"LEAF_SEGMENT_DSN="+strings.Replace(userDSN, password, password+"x", 1)), "serve", "--listen", "127.0.0.1:0")
		if bad.code == 0 {
			t.Errorf("serve with a wrong password exited 0")
		}
		logs = append(logs, bad.stderr)
	}
	if !strings.Contains(strings.Join(logs, ""), user+":xxxxx@tcp") {
		t.Errorf("the logs do not name the store with the password hidden; got:\n%s", strings.Join(logs, "\n---\n"))
	}
	for i, l := range logs {
		for _, secret := range []string{password, serveToken} {
			if strings.Contains(l, secret) {
				t.Errorf("log %d holds the secret %q:\n%s", i, secret, l)
			}
		}
		if showsOpaqueKey(l) {
			t.Errorf("log %d holds part of the opaque key:\n%s", i, l)
		}
	}
}
