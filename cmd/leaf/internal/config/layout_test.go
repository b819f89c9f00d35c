package config

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/leafgo/leaf/snowflake"
)

// custom41_8_14 is a layout no preset has.
var custom41_8_14 = snowflake.Layout{Epoch: snowflake.LeafEpoch, TimeBits: 41, WorkerBits: 8, SequenceBits: 14}

// The preset comes from every source, fills the numbers, and a later source
// wins as for any key; numbers alone name their layout.
func TestLayoutPreset(t *testing.T) {
	for _, c := range []struct {
		name     string
		yaml     string // "": no file
		env      []string
		flags    map[string]string
		wantName string
		want     snowflake.Layout
	}{
		{"default", "", nil, nil, "leaf", snowflake.LeafLayout},
		{"yaml", "snowflake:\n  layout: js-safe\n", nil, nil, "js-safe", snowflake.JSSafeLayout},
		{"env", "", []string{"LEAF_SNOWFLAKE_LAYOUT=js-safe"}, nil, "js-safe", snowflake.JSSafeLayout},
		{"flag", "", nil, map[string]string{"snowflake.layout": "js-safe"}, "js-safe", snowflake.JSSafeLayout},
		{"any case", "", []string{"LEAF_SNOWFLAKE_LAYOUT=JS-Safe"}, nil, "js-safe", snowflake.JSSafeLayout},
		{"env over yaml", "snowflake:\n  layout: js-safe\n", []string{"LEAF_SNOWFLAKE_LAYOUT=leaf"}, nil, "leaf", snowflake.LeafLayout},
		{"flag over env", "", []string{"LEAF_SNOWFLAKE_LAYOUT=leaf"}, map[string]string{"snowflake.layout": "js-safe"}, "js-safe", snowflake.JSSafeLayout},
		{"sample file and env", sampleFile(t), []string{"LEAF_SNOWFLAKE_LAYOUT=js-safe"}, nil, "js-safe", snowflake.JSSafeLayout},
		{"preset repeated by a number", "snowflake:\n  layout: js-safe\n  worker_bits: 5\n", nil, nil, "js-safe", snowflake.JSSafeLayout},
		{"numbers alone", "snowflake:\n  worker_bits: 8\n  sequence_bits: 14\n", nil, nil, "custom", custom41_8_14},
		{"numbers that are a preset", "", []string{"LEAF_SNOWFLAKE_EPOCH=1767225600000", "LEAF_SNOWFLAKE_TIME_BITS=40",
			"LEAF_SNOWFLAKE_WORKER_BITS=5", "LEAF_SNOWFLAKE_SEQUENCE_BITS=8"}, nil, "js-safe", snowflake.JSSafeLayout},
		{"custom", "snowflake:\n  layout: custom\n  worker_bits: 8\n  sequence_bits: 14\n", nil, nil, "custom", custom41_8_14},
		{"custom of defaults", "snowflake:\n  layout: custom\n", nil, nil, "custom", snowflake.LeafLayout},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := Sources{Env: c.env, Flags: c.flags}
			if c.yaml != "" {
				src.File = writeFile(t, c.yaml)
			}
			cfg, err := Load(src)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := cfg.Snowflake.Layout(); cfg.Snowflake.LayoutName != c.wantName || got != c.want {
				t.Fatalf("layout %q %s, want %q %s", cfg.Snowflake.LayoutName, got, c.wantName, c.want)
			}
		})
	}
}

// sampleFile is etc/leaf.yml's text.
func sampleFile(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../../../etc/leaf.yml")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A preset with a number of its own is refused, every such number named
// with where it was set; a name no preset has is refused with the list.
func TestLayoutPresetRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		src  func(t *testing.T) Sources
		want []string
	}{
		{"number against the preset", func(t *testing.T) Sources {
			return Sources{File: writeFile(t, "snowflake:\n  layout: js-safe\n  time_bits: 41\n")}
		}, []string{"snowflake.time_bits (from ", "leaf.yml:3): 41 differs from the js-safe layout's 40 (snowflake.layout from ", "leaf.yml:2)",
			"remove snowflake.time_bits, or set snowflake.layout custom"}},
		{"numbers across sources", func(t *testing.T) Sources {
			return Sources{File: writeFile(t, "snowflake:\n  epoch: 1288834974657\n"),
				Env: []string{"LEAF_SNOWFLAKE_LAYOUT=js-safe", "LEAF_SNOWFLAKE_SEQUENCE_BITS=12"}}
		}, []string{"snowflake.epoch (from ", "leaf.yml:2): 1288834974657 differs from the js-safe layout's 1767225600000 (snowflake.layout from LEAF_SNOWFLAKE_LAYOUT)",
			"snowflake.sequence_bits (from LEAF_SNOWFLAKE_SEQUENCE_BITS): 12 differs from the js-safe layout's 8"}},
		{"leaf against a number", func(t *testing.T) Sources {
			return Sources{Flags: map[string]string{"snowflake.layout": "leaf"}, Env: []string{"LEAF_SNOWFLAKE_WORKER_BITS=5"}}
		}, []string{"snowflake.worker_bits (from LEAF_SNOWFLAKE_WORKER_BITS): 5 differs from the leaf layout's 10 (snowflake.layout from --snowflake-layout)"}},
		{"unknown name in env", func(*testing.T) Sources {
			return Sources{Env: []string{"LEAF_SNOWFLAKE_LAYOUT=js"}}
		}, []string{`LEAF_SNOWFLAKE_LAYOUT: "js" is not one of leaf, js-safe, custom`}},
		{"unknown name in yaml", func(t *testing.T) Sources {
			return Sources{File: writeFile(t, "snowflake:\n  layout: safe\n")}
		}, []string{`leaf.yml:2: snowflake.layout: "safe" is not one of leaf, js-safe, custom`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			loadFails(t, c.src(t), c.want...)
		})
	}

	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	BindFlags(fs, "snowflake.layout")
	err := fs.Parse([]string{"--snowflake-layout", "js_safe"})
	if err == nil || !strings.Contains(err.Error(), `"js_safe" is not one of leaf, js-safe, custom`) {
		t.Fatalf("--snowflake-layout js_safe: %v", err)
	}
}

// A Config built in code that names a preset must hold its numbers.
func TestValidateLayoutName(t *testing.T) {
	cfg := Default()
	cfg.Snowflake.LayoutName = snowflake.LayoutJSSafe
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "snowflake.layout: js-safe is 40/5/8 bits, epoch 2026-01-01T00:00:00Z, but epoch and the *_bits keys say 41/10/12 bits") {
		t.Fatalf("Validate = %v", err)
	}
	cfg.Snowflake.setLayout(snowflake.JSSafeLayout)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate of the preset's numbers: %v", err)
	}
	cfg.Snowflake.LayoutName = snowflake.LayoutCustom
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate of custom with the preset's numbers: %v", err)
	}
}

// The enum of snowflake.layout is the presets and custom.
func TestLayoutEnumIsThePresets(t *testing.T) {
	f, _ := fieldByPath("snowflake.layout")
	for _, name := range f.enum {
		_, err := snowflake.Preset(name)
		if (err == nil) != (name != snowflake.LayoutCustom) {
			t.Errorf("enum value %q: Preset error %v", name, err)
		}
	}
	if len(f.enum) != 3 {
		t.Errorf("enum %v, want leaf, js-safe, custom", f.enum)
	}
}
