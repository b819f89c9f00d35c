package main

import (
	"cmp"
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

const getUsage = `Usage: leaf get TAG [--count N] [--server URL] [--cacert FILE]

Asks a running server for IDs of a segment tag (GET /api/segment/get/TAG)
and prints them, one per line. A server error is printed on stderr with
exit status 1. For an https:// server whose certificate the system does not
trust (a private CA, a self-signed certificate), --cacert names the PEM
file of the CA certificates to trust instead.
`

func (a *app) get(ctx context.Context, args []string) error {
	fs := newFlagSet("get")
	count := fs.Int("count", 1, "how many IDs, 1..10000")
	server := fs.String("server", "", "base `URL` of the server (default $"+envServer+", else "+defaultServer+")")
	cacert := fs.String("cacert", "", cacertUsage)
	pos, err := a.parseFlags(fs, getUsage, args)
	if err != nil {
		return err
	}
	if err := wantArgs(pos, "TAG"); err != nil {
		return err
	}
	tag := pos[0]
	if err := leaf.ValidateTag(tag); err != nil {
		return err
	}
	if err := leaf.ValidateCount(*count); err != nil {
		return err
	}
	u, err := a.serverURL(*server)
	if err != nil {
		return err
	}
	client := http.DefaultClient
	if *cacert != "" {
		if u.Scheme != "https" {
			return usageErrorf("--cacert is for an https:// server; %s is plain HTTP", u.Redacted())
		}
		tlsCfg, err := clientTLS(*cacert)
		if err != nil {
			return err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tlsCfg
		client = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
	}
	u = u.JoinPath("api", "segment", "get", tag)
	if *count != 1 {
		u.RawQuery = "count=" + strconv.Itoa(*count)
	}

	ctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	resp, err := client.Do(req)
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

// serverURL is the server the client commands talk to: --server (flag),
// else $LEAF_SERVER, else the default; a bare host:port is accepted for
// convenience.
func (a *app) serverURL(flag string) (*url.URL, error) {
	s := cmp.Or(flag, lookupEnv(a.env, envServer), defaultServer)
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
