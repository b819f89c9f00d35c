package config

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateSecurity(t *testing.T) {
	const secret = "s3cr3t-but-short"
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"token ok", func(c *Config) { c.Admin.Token = "0123456789abcdef" }, ""},
		{"token short", func(c *Config) { c.Admin.Token = "s3cr3t" }, "admin.token: too short (6 bytes), want at least 16"},
		{"token with space", func(c *Config) { c.Admin.Token = secret[:8] + " " + secret[8:] }, "admin.token: byte 9 is a space"},
		{"token non-ascii", func(c *Config) { c.Admin.Token = "0123456789abcdefé" }, "admin.token: byte 17"},
		{"tls both", func(c *Config) { c.TLS = TLS{Cert: "c.pem", Key: "k.pem"} }, ""},
		{"tls cert only", func(c *Config) { c.TLS.Cert = "c.pem" }, "tls: tls.cert and tls.key go together"},
		{"tls key only", func(c *Config) { c.TLS.Key = "k.pem" }, "tls: tls.cert and tls.key go together"},
		{"rate ok", func(c *Config) { c.RateLimit = RateLimit{PerSecond: 100, Burst: 10} }, ""},
		{"rate negative", func(c *Config) { c.RateLimit.PerSecond = -1 }, "rate_limit.per_second: -1 is negative"},
		{"burst negative", func(c *Config) { c.RateLimit.Burst = -2 }, "rate_limit.burst: -2 is negative"},
		{"opaque key ok", func(c *Config) { c.Segment.OpaqueKey = opaqueKeyText }, ""},
		{"opaque key short", func(c *Config) { c.Segment.OpaqueKey = opaqueKeyText[:30] },
			"segment.opaque_key: invalid opaque key: 30 hexadecimal digits, want 32..128"},
		{"opaque key not hex", func(c *Config) { c.Segment.OpaqueKey = opaqueKeyText[:40] + "g" + opaqueKeyText[41:] },
			"segment.opaque_key: invalid opaque key: character 41 is not a hexadecimal digit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.edit(&c)
			err := c.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want ErrInvalid containing %q", err, tt.want)
			}
			if c.Admin.Token != "" && strings.Contains(err.Error(), c.Admin.Token) {
				t.Errorf("the error quotes the token: %v", err)
			}
			checkNoOpaqueKey(t, err.Error())
		})
	}
}

// opaqueKeyText is an opaque key recognisable in any output: checkNoOpaqueKey
// looks for pieces of it.
const opaqueKeyText = "0beefed0beefed0beefed0beefed0beefed0beefed0beefed0beefed01234567"

// checkNoOpaqueKey fails if s shows any 8 hex digits of opaqueKeyText.
func checkNoOpaqueKey(t *testing.T, s string) {
	t.Helper()
	lower := strings.ToLower(s)
	for i := 0; i+8 <= len(opaqueKeyText); i++ {
		if strings.Contains(lower, opaqueKeyText[i:i+8]) {
			t.Errorf("the output shows part of the opaque key: %s", s)
			return
		}
	}
}

// TestOpaqueKey loads the opaque key from each place it may come from, as
// serve does (Load, then OpaqueKey), and the mistakes in each: the error
// names the setting, and where it was set, never the key.
func TestOpaqueKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	want, err := hex.DecodeString(opaqueKeyText)
	if err != nil {
		t.Fatal(err)
	}
	other := strings.Repeat("ab", 15) + "cd" // 16 bytes, not opaqueKeyText
	yaml := func(name, key, value string) string {
		return write(name, "segment:\n  "+key+": "+value+"\n")
	}
	keyFile := write("key", opaqueKeyText+"\n")
	missing := filepath.Join(dir, "nope")
	tests := []struct {
		name      string
		src       Sources
		want      []byte // nil: no key
		wantError string
	}{
		{"none", Sources{}, nil, ""},
		{"YAML", Sources{File: yaml("a.yml", "opaque_key", opaqueKeyText)}, want, ""},
		{"YAML, upper case", Sources{File: yaml("b.yml", "opaque_key", strings.ToUpper(opaqueKeyText))}, want, ""},
		{"env", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY=" + opaqueKeyText}}, want, ""},
		{"env over YAML", Sources{File: yaml("c.yml", "opaque_key", other), Env: []string{"LEAF_SEGMENT_OPAQUE_KEY=" + opaqueKeyText}}, want, ""},
		{"file from env", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY_FILE=" + keyFile}}, want, ""},
		{"file from YAML", Sources{File: yaml("d.yml", "opaque_key_file", keyFile)}, want, ""},
		{"file from the flag", Sources{Flags: map[string]string{"segment.opaque_key_file": keyFile}}, want, ""},
		{"file wins over the key", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY=" + other, "LEAF_SEGMENT_OPAQUE_KEY_FILE=" + keyFile}}, want, ""},
		{"file crlf, more lines", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY_FILE=" + write("crlf", opaqueKeyText+"\r\nignored\n")}}, want, ""},
		{"file without newline", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY_FILE=" + write("bare", opaqueKeyText)}}, want, ""},

		{"YAML short", Sources{File: yaml("e.yml", "opaque_key", opaqueKeyText[:20])},
			nil, "segment.opaque_key (from " + filepath.Join(dir, "e.yml") + ":2): invalid opaque key: 20 hexadecimal digits, want 32..128"},
		{"env not hex", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY=" + strings.Replace(opaqueKeyText, "d0", "d-", 1)}},
			nil, "segment.opaque_key (from LEAF_SEGMENT_OPAQUE_KEY): invalid opaque key: character 8 is not a hexadecimal digit"},
		{"env base64", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY=C+7+0L7v7Qvu/tC+7+0L7v7Qvu/tC+7+0L7v7QEjRWc="}},
			nil, "segment.opaque_key (from LEAF_SEGMENT_OPAQUE_KEY): invalid opaque key: character 2 is not a hexadecimal digit"},
		{"env odd", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY=" + opaqueKeyText[:63]}},
			nil, "invalid opaque key: an odd number (63) of hexadecimal digits"},
		{"all zeros", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY=" + strings.Repeat("0", 32)}},
			nil, "invalid opaque key: one byte repeated 16 times, not a random key"},
		{"file short", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY_FILE=" + write("short", opaqueKeyText[:16]+"\n")}},
			nil, "segment.opaque_key_file " + filepath.Join(dir, "short") + ": invalid opaque key: 16 hexadecimal digits, want 32..128"},
		{"file with a trailing space", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY_FILE=" + write("space", opaqueKeyText+" \n")}},
			nil, "segment.opaque_key_file " + filepath.Join(dir, "space") + ": invalid opaque key: character 65 is not a hexadecimal digit"},
		{"file empty", Sources{Env: []string{"LEAF_SEGMENT_OPAQUE_KEY_FILE=" + write("empty", "")}},
			nil, "segment.opaque_key_file " + filepath.Join(dir, "empty") + ": invalid opaque key: empty"},
		{"file missing", Sources{Flags: map[string]string{"segment.opaque_key_file": missing}},
			nil, "segment.opaque_key_file " + missing + ": file does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(tt.src)
			var got []byte
			if err == nil {
				got, err = cfg.OpaqueKey()
			}
			if tt.wantError != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("OpaqueKey = %x, %v; want ErrInvalid containing %q", got, err, tt.wantError)
				}
				checkNoOpaqueKey(t, err.Error())
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("OpaqueKey = %x, %v; want %x", got, err, tt.want)
			}
		})
	}
}

func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name      string
		admin     Admin
		want      string
		wantError string
	}{
		{"none", Admin{}, "", ""},
		{"inline", Admin{Token: "inline-token-0123"}, "inline-token-0123", ""},
		{"file wins", Admin{Token: "inline-token-0123", TokenFile: write("a", "file-token-0123456\nignored\n")}, "file-token-0123456", ""},
		{"file crlf", Admin{TokenFile: write("b", "file-token-0123456\r\n")}, "file-token-0123456", ""},
		{"file no newline", Admin{TokenFile: write("c", "file-token-0123456")}, "file-token-0123456", ""},
		{"file short", Admin{TokenFile: write("d", "short\n")}, "", "token too short (5 bytes)"},
		{"file empty", Admin{TokenFile: write("e", "")}, "", "token too short (0 bytes)"},
		{"file missing", Admin{TokenFile: filepath.Join(dir, "nope")}, "", "admin.token_file " + filepath.Join(dir, "nope") + ": file does not exist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Admin = tt.admin
			got, err := c.AdminToken()
			if tt.wantError != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantError) {
					t.Fatalf("AdminToken = %q, %v; want error containing %q", got, err, tt.wantError)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("AdminToken = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestCheckAdminExposure(t *testing.T) {
	tests := []struct {
		listen   string
		token    string
		insecure bool
		refused  bool
	}{
		{"127.0.0.1:8080", "", false, false},
		{"127.0.0.2:8080", "", false, false},
		{"[::1]:8080", "", false, false},
		{"[::ffff:127.0.0.1]:8080", "", false, false},
		{"localhost:8080", "", false, false},
		{"LOCALHOST:8080", "", false, false},
		{":8080", "", false, true},
		{"0.0.0.0:8080", "", false, true},
		{"[::]:8080", "", false, true},
		{"10.1.2.3:8080", "", false, true},
		{"leaf.internal:8080", "", false, true},
		{"0.0.0.0:8080", "0123456789abcdef", false, false},
		{"0.0.0.0:8080", "", true, false},
		{":8080", "0123456789abcdef", true, false},
	}
	for _, tt := range tests {
		c := Default()
		c.Listen = tt.listen
		c.Admin.Insecure = tt.insecure
		err := c.CheckAdminExposure(tt.token)
		if got := err != nil; got != tt.refused {
			t.Errorf("listen %s token %t insecure %t: err = %v, want refused %t", tt.listen, tt.token != "", tt.insecure, err, tt.refused)
			continue
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !errors.Is(err, ErrAdminExposed) ||
			!strings.Contains(err.Error(), "--insecure-admin") || !strings.Contains(err.Error(), tt.listen)) {
			t.Errorf("listen %s: error %q should wrap ErrInvalid and ErrAdminExposed, name the address and the way out", tt.listen, err)
		}
	}
}
