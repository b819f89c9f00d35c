package config

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// ErrNodeLocal is wrapped by CheckSingleNode's error. Its text is the key
// that lifts the refusal, so that the message reads like every ErrInvalid
// one: "invalid configuration: single_node: ...".
var ErrNodeLocal = errors.New("single_node")

// Resolver returns the addresses of a host name; serve uses the system
// resolver, tests a table.
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// SystemResolver resolves with net.DefaultResolver.
func SystemResolver(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// CheckSingleNode refuses a server whose IDs come from state on this node
// alone on a listen address other hosts can reach, unless single_node says
// it is the only server. Such a configuration is correct on one host and
// silently wrong on two: a second replica, behind the same load balancer,
// issues the same IDs. Node-local state is
//
//   - the embedded SQLite store (segment mode on): each replica's file is its
//     own and counts from the same start;
//   - the local registry (snowflake mode on) with a worker ID nobody chose:
//     snowflake.worker_id unset in every source and no snowflake.worker_ids
//     map, so every replica is worker 0.
//
// An explicit worker ID counts as the operator's choice: two hosts given the
// same one cannot be told apart from here. A listen address is reachable
// unless it is a loopback IP or a host name that resolves to loopback
// addresses only ("localhost" is taken as loopback without asking); an
// unspecified address (0.0.0.0, ::, an empty host) is every interface. The
// HTTP and the gRPC listener are both checked. o says which keys a source set.
func (c Config) CheckSingleNode(ctx context.Context, o Origins, resolve Resolver) error {
	if c.SingleNode {
		return nil
	}
	sqlite := c.Segment.Enabled && c.Segment.Store == StoreSQLite
	worker0 := c.Snowflake.Enabled && c.Snowflake.Registry == RegistryLocal && !c.Snowflake.explicitWorker(o)
	if !sqlite && !worker0 {
		return nil
	}
	var exposed []string
	for _, l := range []struct{ key, addr string }{{"listen", c.Listen}, {"grpc_listen", c.GRPCListen}} {
		if l.addr == "" {
			continue
		}
		if why := reachable(ctx, l.addr, resolve); why != "" {
			exposed = append(exposed, fmt.Sprintf("%s %s (%s)", l.key, l.addr, why))
		}
	}
	if len(exposed) == 0 {
		return nil
	}

	var state, twice, share []string
	if sqlite {
		state = append(state, "the embedded SQLite store (segment.store sqlite)")
		twice = append(twice, "their SQLite files are independent and hand out the same segments")
		share = append(share, "segment.store: mysql|postgres, with segment.dsn naming the database every server shares")
	}
	if worker0 {
		state = append(state, "the local registry's default worker ID 0 (snowflake.registry local, no worker_id set)")
		twice = append(twice, "both run as snowflake worker 0")
		share = append(share, "snowflake.registry: zookeeper|etcd|mysql, or an explicit worker ID distinct on every host "+
			"(snowflake.worker_id, LEAF_SNOWFLAKE_WORKER_ID, --worker-id)")
	}
	return fmt.Errorf("%w: %w: %s %s reachable from other hosts, but this server's IDs come from state on this node alone: %s. "+
		"Two servers started with this configuration would each issue the same IDs: %s. "+
		"If this is the only server, say so with single_node: true (LEAF_SINGLE_NODE=true, --single-node); "+
		"otherwise share the state between servers: %s",
		ErrInvalid, ErrNodeLocal, strings.Join(exposed, " and "), isAre(len(exposed)), strings.Join(state, " and "),
		strings.Join(twice, ", and "), strings.Join(share, "; "))
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

// explicitWorker reports whether the local registry's worker ID was chosen:
// worker_id set by some source (even to 0), or a worker_ids map.
func (s Snowflake) explicitWorker(o Origins) bool {
	return o.Set("snowflake.worker_id") || strings.TrimSpace(s.WorkerIDs) != ""
}

// reachable says why other hosts can reach a listen address, "" when they
// cannot. The address has passed validateListen.
func reachable(ctx context.Context, addr string, resolve Resolver) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "not host:port"
	}
	if host == "" {
		return "every interface"
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		switch ip = ip.Unmap(); {
		case ip.IsLoopback():
			return ""
		case ip.IsUnspecified():
			return "every interface"
		}
		return "not a loopback address"
	}
	if strings.EqualFold(host, "localhost") {
		return ""
	}
	ips, err := resolve(ctx, host)
	if err != nil {
		return fmt.Sprintf("%s does not resolve: %v", host, err)
	}
	if len(ips) == 0 {
		return host + " resolves to no address"
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return fmt.Sprintf("%s resolves to %s", host, ip)
		}
	}
	return ""
}
