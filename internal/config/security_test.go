package config

import (
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
