package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/client"
)

// envServer names the server 'leaf get' asks when --server is not given.
const envServer = "LEAF_SERVER"

const defaultServer = "http://127.0.0.1:8080"

// getTimeout bounds one 'leaf get' request; the server itself answers or
// fails within its wait_timeout, so this only catches a hung connection.
const getTimeout = 30 * time.Second

// maxGetBody caps what is read from the server: 10,000 IDs of 19 digits
// and a newline each, with room to spare.
const maxGetBody = 1 << 20

const getUsage = `Usage: leaf get TAG [--count N] [--server [ZONE=]URL]... [--zone ZONE] [--cacert FILE]

Asks a running server for IDs of a segment tag (GET /api/segment/get/TAG)
and prints them, one per line. A server error is printed on stderr with
exit status 1. For an https:// server whose certificate the system does not
trust (a private CA, a self-signed certificate), --cacert names the PEM
file of the CA certificates to trust instead.

With several servers (--server repeated or comma-separated), or servers in
zones (--server dc1=http://10.0.0.1:8080), it asks them through the Go
client, over the /v2 API: round robin, failing over from one to the next,
and with --zone, the servers of that zone first, the others only while
all of them fail.
`

func (a *app) get(ctx context.Context, args []string) error {
	fs := newFlagSet("get")
	count := fs.Int("count", 1, "how many IDs, 1..10000")
	var serverList serverFlag
	fs.Var(&serverList, "server", serverFlagUsage)
	zone := fs.String("zone", "", zoneFlagUsage)
	cacert := fs.String("cacert", "", cacertUsage)
	pos, err := a.parseFlags(fs, getUsage, args)
	if err != nil {
		return err
	}
	tag, err := tagArg(pos)
	if err != nil {
		return err
	}
	if err := leaf.ValidateCount(*count); err != nil {
		return err
	}
	srv, err := a.resolveServers(serverList, *zone)
	if err != nil {
		return err
	}
	var tlsCfg *tls.Config
	if *cacert != "" {
		if err := srv.httpsOnly(); err != nil {
			return usageErrorf("--cacert is for an https:// server; %v", err)
		}
		if tlsCfg, err = clientTLS(*cacert); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	if srv.one == nil {
		return a.getZoned(ctx, srv, tlsCfg, tag, *count)
	}
	u := srv.one
	hc := http.DefaultClient
	if tlsCfg != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsCfg
		hc = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
	}
	u = u.JoinPath("api", "segment", "get", tag)
	if *count != 1 {
		u.RawQuery = "count=" + strconv.Itoa(*count)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err // already says "Get URL: ..."
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxGetBody))
	if err != nil {
		return fmt.Errorf("read answer from %s: %w", u.Redacted(), err)
	}
	text := strings.TrimSpace(string(body))
	if resp.StatusCode != http.StatusOK {
		if text == "" {
			text = http.StatusText(resp.StatusCode)
		}
		return fmt.Errorf("server answered %s: %s", resp.Status, text)
	}
	if text == "" {
		return fmt.Errorf("server answered %s with no ID", resp.Status)
	}
	_, err = fmt.Fprintln(a.stdout, text)
	return err
}

// getZoned is 'leaf get' of several servers or zones: through the Go
// client, which fails over and prefers the zone.
func (a *app) getZoned(ctx context.Context, srv servers, tlsCfg *tls.Config, tag string, count int) error {
	var opts []client.Option
	if tlsCfg != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsCfg
		defer tr.CloseIdleConnections()
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: tr}))
	}
	c, err := srv.newClient(a.stderr, opts...)
	if err != nil {
		return usageErrorf("--server: %v", err)
	}
	ids := make([]int64, 1)
	if count == 1 {
		ids[0], err = c.NextID(ctx, tag)
	} else {
		ids, err = c.NextIDs(ctx, tag, count)
	}
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strconv.FormatInt(id, 10))
		b.WriteByte('\n')
	}
	_, err = io.WriteString(a.stdout, b.String())
	return err
}

const cacertUsage = "PEM `FILE` of the CA certificates to trust for an https:// server, instead of the system's"

// clientTLS is the TLS configuration of a client that trusts the CA
// certificates in the PEM file cacert (--cacert), and them only. A file that
// does not exist or holds no certificate is a usage error.
func clientTLS(cacert string) (*tls.Config, error) {
	pemData, err := os.ReadFile(cacert)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, usageErrorf("--cacert %s: file does not exist", cacert)
	}
	if err != nil {
		return nil, fmt.Errorf("--cacert: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, usageErrorf("--cacert %s holds no PEM certificate", cacert)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// parseServer parses a server of the client commands (--server,
// $LEAF_SERVER); a bare host:port is accepted for convenience.
func parseServer(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("--server %q is not an http(s) URL like %s", s, defaultServer)
	}
	return u, nil
}

func lookupEnv(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val // the last one wins, as in config.Load
		}
	}
	return v
}
