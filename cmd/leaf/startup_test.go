package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafgo/leaf"
	"github.com/leafgo/leaf/cmd/leaf/internal/config"
	"github.com/leafgo/leaf/local"
	"github.com/leafgo/leaf/snowflake"
	"github.com/leafgo/leaf/sqlite"
)

// occupied listens on a loopback port for the test's duration and returns
// its address.
func occupied(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// storeEnv is an environment whose data directory holds an empty SQLite
// store, as 'leaf serve' leaves it.
func storeEnv(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	s, err := sqlite.Open(t.Context(), filepath.Join(dir, "leaf.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return []string{"LEAF_DATA_DIR=" + dir}
}

// TestServeValidatesBeforeSideEffects: a start refused for a setting, a port
// in use included, leaves nothing behind: the data directory (SQLite store,
// the local registry's worker files) is not even created.
func TestServeValidatesBeforeSideEffects(t *testing.T) {
	t.Parallel()
	busy := occupied(t)
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want []string // substrings of stderr
	}{
		{"http port in use", nil, []string{"--listen", busy}, 1,
			[]string{"leaf serve: listen: listen tcp " + busy, "address already in use"}},
		{"grpc port in use", nil, []string{"--listen", "127.0.0.1:0", "--grpc-listen", busy}, 1,
			[]string{"leaf serve: listen for gRPC: listen tcp " + busy, "address already in use"}},
		{"layout ends within 10 years", []string{"LEAF_SNOWFLAKE_TIME_BITS=30"}, []string{"--listen", "127.0.0.1:0"}, 2,
			[]string{"snowflake.time_bits (from LEAF_SNOWFLAKE_TIME_BITS): layout 30/10/12 bits", "runs out at 2010-11-16", "less than 10 years from now"}},
		{"epoch in the future", []string{"LEAF_SNOWFLAKE_EPOCH=" + future}, []string{"--listen", "127.0.0.1:0"}, 2,
			[]string{"snowflake.epoch (from LEAF_SNOWFLAKE_EPOCH):", "is in the future"}},
		{"layout and port both wrong", []string{"LEAF_SNOWFLAKE_TIME_BITS=30"}, []string{"--listen", busy}, 2,
			[]string{"snowflake.time_bits"}},
		{"missing token file", nil, []string{"--listen", "127.0.0.1:0", "--admin-token-file", "/nonexistent/token"}, 2,
			[]string{"admin.token_file /nonexistent/token: file does not exist"}},
		{"bad certificate", nil, []string{"--listen", "127.0.0.1:0", "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"}, 2,
			[]string{"load TLS certificate /nonexistent/c.pem"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := filepath.Join(t.TempDir(), "data")
			env := append([]string{"LEAF_DATA_DIR=" + data}, tt.env...)
			r := runCLI(t, env, append([]string{"serve"}, tt.args...)...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d; stderr %q", r.code, tt.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q does not say %q", r.stderr, w)
				}
			}
			if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
				entries, _ := os.ReadDir(data)
				t.Errorf("the refused start created its data directory %s (%v): %v", data, err, entries)
			}
		})
	}
}

// TestServeReleasesHTTPPortOnGRPCFailure: when the gRPC listener cannot be
// bound, the HTTP one already bound is closed again.
func TestServeReleasesHTTPPortOnGRPCFailure(t *testing.T) {
	t.Parallel()
	busy := occupied(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	free := ln.Addr().String()
	ln.Close()
	if r := runCLI(t, dataEnv(t), "serve", "--listen", free, "--grpc-listen", busy); r.code != 1 {
		t.Fatalf("exit %d, want 1: %s", r.code, r.stderr)
	}
	ln, err = net.Listen("tcp", free)
	if err != nil {
		t.Fatalf("the HTTP port %s is still held after the refusal: %v", free, err)
	}
	ln.Close()
}

// TestTagsNeverCreateStore: the tags commands that read or change tags need
// the store to exist; a mistyped --data-dir is an error naming the file, and
// nothing is created. Only create may make a new store, and says so.
func TestTagsNeverCreateStore(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"tags", "list"},
		{"tags", "list", "--json"},
		{"tags", "set-step", "orders", "10"},
		{"tags", "delete", "orders"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			typo := filepath.Join(t.TempDir(), "typo")
			r := runCLI(t, nil, append(args, "--data-dir", typo)...)
			want := "no segment store at " + filepath.Join(typo, "leaf.db")
			if r.code != 1 || !strings.Contains(r.stderr, want) || r.stdout != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", r.code, r.stdout, r.stderr, want)
			}
			if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was created (%v)", typo, err)
			}
			// segment.dsn names the file itself.
			file := filepath.Join(typo, "custom.db")
			r = runCLI(t, nil, append(args, "--segment-dsn", file)...)
			if r.code != 1 || !strings.Contains(r.stderr, "no segment store at "+file) {
				t.Errorf("--segment-dsn: exit %d, stderr %q", r.code, r.stderr)
			}
			if _, err := os.Stat(typo); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s was created (%v)", typo, err)
			}
		})
	}
	t.Run("create", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "new")
		r := runCLI(t, nil, "tags", "create", "orders", "--data-dir", dir)
		if r.code != 0 || !strings.Contains(r.stderr, "created a new SQLite store at "+filepath.Join(dir, "leaf.db")) {
			t.Fatalf("exit %d, stderr %q; want 0 and a note naming the new store", r.code, r.stderr)
		}
		r = runCLI(t, nil, "tags", "create", "more", "--data-dir", dir)
		if r.code != 0 || strings.Contains(r.stderr, "new SQLite store") {
			t.Errorf("second create: exit %d, stderr %q; want no note", r.code, r.stderr)
		}
		if r := runCLI(t, nil, "tags", "list", "--data-dir", dir); r.code != 0 || !strings.Contains(r.stdout, "orders") {
			t.Errorf("list: %+v", r)
		}
	})
}

// TestLayoutLifetimeAgreesWithGenerator: serve's early check refuses exactly
// the layouts the snowflake generator refuses, at either side of the
// lifetime, so that the early check neither misses one nor refuses more.
func TestLayoutLifetimeAgreesWithGenerator(t *testing.T) {
	t.Parallel()
	now := time.Now()
	// 39 bits of milliseconds last about 17 years: the epoch is chosen to
	// put the layout's end an hour either side of the required lifetime.
	epochFor := func(end time.Time) int { return int(end.UnixMilli() - 1<<39) }
	tests := []struct {
		name    string
		epoch   int
		refused bool
	}{
		{"ends an hour short", epochFor(now.Add(config.SnowflakeLifetime - time.Hour)), true},
		{"ends an hour past", epochFor(now.Add(config.SnowflakeLifetime + time.Hour)), false},
		{"epoch in an hour", int(now.Add(time.Hour).UnixMilli()), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Snowflake.Epoch, cfg.Snowflake.TimeBits = tt.epoch, 39
			early := cfg.CheckSnowflakeLifetime(now, nil)
			if (early != nil) != tt.refused {
				t.Errorf("CheckSnowflakeLifetime = %v, want refused %v", early, tt.refused)
			}
			if early != nil && !errors.Is(early, config.ErrInvalid) {
				t.Errorf("CheckSnowflakeLifetime = %v, want config.ErrInvalid", early)
			}
			reg, err := local.New(local.Config{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			s := snowflake.DefaultConfig()
			s.Layout, s.Registry, s.Endpoint = cfg.Snowflake.Layout(), reg, leaf.Endpoint{IP: "127.0.0.1", Port: 8080}
			gen, err := snowflake.New(ctx, s)
			if (err != nil) != tt.refused {
				t.Errorf("snowflake.New: %v, want refused %v", err, tt.refused)
			}
			if gen != nil {
				if err := gen.Close(ctx); err != nil {
					t.Error(err)
				}
			}
			if err := reg.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}
