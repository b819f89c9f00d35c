package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment variable leaf reads.
const EnvPrefix = "LEAF_"

// EnvConfigFile names the YAML file when --config is not given. It is not a
// key: the file cannot name itself.
const EnvConfigFile = "LEAF_CONFIG"

// Sources are the inputs of Load above the defaults, lowest precedence first.
type Sources struct {
	// LeafProperties is a Java Leaf leaf.properties file (empty: none),
	// applied right above the defaults, so that the YAML file, the
	// environment and flags can each override what it sets. Its mapping is
	// documented in package leafprops.
	LeafProperties string
	// File is the YAML file; empty means the LEAF_CONFIG variable of Env, and
	// no file at all when that is empty too.
	File string
	// Env is the environment in os.Environ form ("KEY=value"). When a name
	// appears twice the last one wins, as with exec.Cmd.
	Env []string
	// Flags maps key paths to the values of the flags the user actually set,
	// so a flag's default never overrides the file or the environment.
	Flags map[string]string
}

// Load builds the configuration: Default, then Java Leaf's leaf.properties,
// then the YAML file, then LEAF_* variables, then flags; then Validate.
// Errors about values wrap ErrInvalid, and so does a file that does not
// exist; a file that exists but cannot be read does not.
func Load(src Sources) (Config, error) {
	cfg, _, err := LoadWithWarnings(src)
	return cfg, err
}

// LoadWithWarnings is Load that also returns the warnings about the
// leaf.properties file: keys it ignores, JDBC parameters it drops.
func LoadWithWarnings(src Sources) (Config, []Warning, error) {
	cfg, _, warnings, err := LoadWithOrigins(src)
	return cfg, warnings, err
}

// Origins tells where each key that is not at its default was set, by key
// path: "--listen", "LEAF_LISTEN", "leaf.yml:3", or the leaf.properties line.
// A value equal to the default counts as set if a source set it; an empty
// one (a YAML key with no value or null, an empty LEAF_* variable) sets
// nothing, so that a sample file can list a key without choosing for the
// operator (etc/leaf.yml's snowflake.worker_id).
type Origins map[string]string

// Set reports whether a source set the key at path.
func (o Origins) Set(path string) bool { return o[path] != "" }

// LoadWithOrigins is LoadWithWarnings that also says where each key was
// set, for the rules that depend on whether a value was chosen rather than
// defaulted (CheckSingleNode).
func LoadWithOrigins(src Sources) (Config, Origins, []Warning, error) {
	cfg := Default()
	origin := Origins{}
	env := envMap(src.Env)

	var warnings []Warning
	if src.LeafProperties != "" {
		data, err := os.ReadFile(src.LeafProperties)
		if err != nil {
			return Config{}, nil, nil, fileError("leaf.properties file", src.LeafProperties, err)
		}
		if warnings, err = cfg.applyLeafProperties(src.LeafProperties, data, origin); err != nil {
			return Config{}, nil, nil, err
		}
	}

	file, what := src.File, "config file"
	if file == "" {
		file, what = env[EnvConfigFile], "config file (from "+EnvConfigFile+")"
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return Config{}, nil, nil, fileError(what, file, err)
		}
		if err := cfg.applyYAML(file, data, origin); err != nil {
			return Config{}, nil, nil, err
		}
	}

	for _, f := range fields() {
		name := f.env()
		v, ok := env[name]
		if !ok || v == "" {
			continue
		}
		if err := cfg.set(f, v); err != nil {
			return Config{}, nil, nil, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
		}
		origin[f.path] = name
	}

	// Apply flags in key order so that the outcome never depends on map order.
	for _, f := range fields() {
		v, ok := src.Flags[f.path]
		if !ok {
			continue
		}
		name := "--" + f.flag
		if f.flag == "" { // set programmatically for a key without a flag
			name = f.path
		}
		if err := cfg.set(f, v); err != nil {
			return Config{}, nil, nil, fmt.Errorf("%w: %s: %v", ErrInvalid, name, err)
		}
		origin[f.path] = name
	}
	for path := range src.Flags {
		if _, ok := fieldByPath(path); !ok {
			return Config{}, nil, nil, fmt.Errorf("%w: flag for unknown key %q", ErrInvalid, path)
		}
	}

	if err := cfg.resolveLayout(origin); err != nil {
		return Config{}, nil, nil, err
	}
	if err := cfg.validate(origin); err != nil {
		return Config{}, nil, nil, err
	}
	return cfg, origin, warnings, nil
}

// fileError describes a file that could not be read. A file that does not
// exist was named wrongly, so that error wraps ErrInvalid (a usage error);
// one that cannot be read (permissions, a directory) does not.
func fileError(what, path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %s %s: %w", ErrInvalid, what, path, fs.ErrNotExist)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// LoadFile reads only a YAML file over the defaults, without validation
// beyond the types and the layout preset's (snowflake.layout): for tests and
// tools that check a sample file.
func LoadFile(path string) (Config, error) {
	cfg := Default()
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config file: %w", err)
	}
	origin := Origins{}
	if err := cfg.applyYAML(path, data, origin); err != nil {
		return Config{}, err
	}
	if err := cfg.resolveLayout(origin); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// UnknownEnv lists the LEAF_* variables in env that leaf does not read, so
// that serve can warn about a typo instead of silently ignoring it.
// LEAF_TEST_* (test suites) and the names in also are not reported.
func UnknownEnv(env []string, also ...string) []string {
	known := map[string]bool{EnvConfigFile: true}
	for _, f := range fields() {
		known[f.env()] = true
	}
	for _, a := range also {
		known[a] = true
	}
	var unknown []string
	for name := range envMap(env) {
		if strings.HasPrefix(name, EnvPrefix) && !strings.HasPrefix(name, EnvPrefix+"TEST_") && !known[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	return unknown
}

// applyYAML walks the document's nodes rather than unmarshalling into the
// struct so that every value goes through the same parser as env and flags,
// unknown keys are errors, and messages carry the line number.
func (c *Config) applyYAML(file string, data []byte, origin map[string]string) error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) { // an empty file (or only comments): nothing set
			return nil
		}
		return fmt.Errorf("%w: %s: %v", ErrInvalid, file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return fmt.Errorf("%w: %s:%d: more than one YAML document", ErrInvalid, file, extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	return c.applyMapping(file, "", reflect.TypeOf(Config{}), root, origin)
}

// applyMapping applies node, which must be a mapping, to the fields of the
// struct type t found under the key path prefix.
func (c *Config) applyMapping(file, prefix string, t reflect.Type, node *yaml.Node, origin map[string]string) error {
	node = deref(node)
	if isNull(node) {
		return nil
	}
	where := "the top level"
	if prefix != "" {
		where = prefix
	}
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: %s:%d: %s must be a mapping of keys, got %s", ErrInvalid, file, node.Line, where, kindName(node))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := deref(node.Content[i]), deref(node.Content[i+1])
		path := k.Value
		if prefix != "" {
			path = prefix + "." + k.Value
		}
		if line, dup := seen[k.Value]; dup {
			return fmt.Errorf("%w: %s:%d: %s is set twice (first at line %d)", ErrInvalid, file, k.Line, path, line)
		}
		seen[k.Value] = k.Line

		sf, ok := yamlField(t, k.Value)
		if !ok {
			return fmt.Errorf("%w: %s:%d: unknown key %q; known keys in %s: %s", ErrInvalid, file, k.Line, path, where, strings.Join(yamlNames(t), ", "))
		}
		if sf.Type.Kind() == reflect.Struct && sf.Type != durationType {
			if err := c.applyMapping(file, path, sf.Type, v, origin); err != nil {
				return err
			}
			continue
		}
		if isNull(v) {
			continue
		}
		f, _ := fieldByPath(path)
		value := v.Value
		switch {
		case v.Kind == yaml.SequenceNode && f.list:
			var err error
			if value, err = sequenceValue(v); err != nil {
				return fmt.Errorf("%w: %s:%d: %s: %v", ErrInvalid, file, v.Line, path, err)
			}
		case v.Kind != yaml.ScalarNode:
			want := "a single value"
			if f.list {
				want = "a value or a list of values"
			}
			return fmt.Errorf("%w: %s:%d: %s wants %s, got %s", ErrInvalid, file, v.Line, path, want, kindName(v))
		}
		if err := c.set(f, value); err != nil {
			return fmt.Errorf("%w: %s:%d: %s: %v", ErrInvalid, file, v.Line, path, err)
		}
		origin[path] = fmt.Sprintf("%s:%d", file, v.Line)
	}
	return nil
}

// sequenceValue joins a YAML sequence of scalars into a list key's value,
// one entry per line. An entry that is empty or spans lines would shift
// every database after it, so it is refused rather than dropped.
func sequenceValue(n *yaml.Node) (string, error) {
	if len(n.Content) == 0 {
		return "", fmt.Errorf("the list is empty")
	}
	entries := make([]string, len(n.Content))
	for i, e := range n.Content {
		e = deref(e)
		if e.Kind != yaml.ScalarNode || isNull(e) {
			return "", fmt.Errorf("entry %d (line %d) must be a single value, got %s", i, e.Line, kindName(e))
		}
		v := strings.TrimSpace(e.Value)
		if v == "" || strings.Contains(v, "\n") {
			return "", fmt.Errorf("entry %d (line %d) must be one non-empty line", i, e.Line)
		}
		entries[i] = v
	}
	return strings.Join(entries, "\n"), nil
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	}
	return "nothing"
}

// field is one configuration key: a leaf of the Config struct.
type field struct {
	path  string // YAML path, e.g. "segment.refresh_interval"
	index []int  // for reflect.Value.FieldByIndex
	typ   reflect.Type
	flag  string   // flag name, "" if none
	arg   string   // the flag argument's name in usage text
	enum  []string // accepted values, nil if any
	help  string
	// list: the key takes one value or several, kept one per line (a YAML
	// sequence, a repeated flag, a variable with one value per line).
	list bool
}

// env is the key's environment variable: LEAF_ + path upper-cased, "." → "_".
func (f field) env() string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(f.path, ".", "_"))
}

var durationType = reflect.TypeOf(time.Duration(0))

var fields = sync.OnceValue(func() []field {
	var out []field
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			name := yamlName(sf)
			if name == "" {
				continue
			}
			path := name
			if prefix != "" {
				path = prefix + "." + name
			}
			idx := append(slices.Clone(index), i)
			if sf.Type.Kind() == reflect.Struct && sf.Type != durationType {
				walk(sf.Type, path, idx)
				continue
			}
			f := field{path: path, index: idx, typ: sf.Type, flag: sf.Tag.Get("flag"), arg: sf.Tag.Get("arg"), help: sf.Tag.Get("help"),
				list: sf.Tag.Get("list") == "true"}
			if f.list && sf.Type.Kind() != reflect.String {
				panic(fmt.Sprintf("config: list key %s must be a string", path))
			}
			if e := sf.Tag.Get("enum"); e != "" {
				f.enum = strings.Split(e, ",")
			}
			if !settable(sf.Type) {
				panic(fmt.Sprintf("config: key %s has unsupported type %v", path, sf.Type))
			}
			out = append(out, f)
		}
	}
	walk(reflect.TypeOf(Config{}), "", nil)
	return out
})

func yamlName(sf reflect.StructField) string {
	name, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
	if name == "-" || !sf.IsExported() {
		return ""
	}
	return name
}

func yamlField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		if sf := t.Field(i); yamlName(sf) == name && name != "" {
			return sf, true
		}
	}
	return reflect.StructField{}, false
}

func yamlNames(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if n := yamlName(t.Field(i)); n != "" {
			names = append(names, n)
		}
	}
	return names
}

func fieldByPath(path string) (field, bool) {
	for _, f := range fields() {
		if f.path == path {
			return f, true
		}
	}
	return field{}, false
}

func settable(t reflect.Type) bool {
	if t == durationType {
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int:
		return true
	case reflect.Pointer:
		return t.Elem() != durationType && settable(t.Elem()) && t.Elem().Kind() != reflect.Pointer
	}
	return false
}

// value is the field in c, with pointers followed (a nil pointer gives the
// zero value of its element type).
func (c *Config) value(f field) reflect.Value {
	v := reflect.ValueOf(c).Elem().FieldByIndex(f.index)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Zero(v.Type().Elem())
		}
		return v.Elem()
	}
	return v
}

// set parses s for the key's type and stores it. The same parser serves the
// YAML file, the environment and flags, so every source accepts the same
// spellings and fails with the same message.
func (c *Config) set(f field, s string) error {
	v := reflect.ValueOf(c).Elem().FieldByIndex(f.index)
	parsed, err := parseValue(f, s)
	if err != nil {
		return err
	}
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(parsed)
		v.Set(p)
		return nil
	}
	v.Set(parsed)
	return nil
}

func parseValue(f field, s string) (reflect.Value, error) {
	t := f.typ
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s = strings.TrimSpace(s)
	if f.list {
		s = strings.Join(splitList(s), "\n")
	}
	if t == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
				return reflect.Value{}, fmt.Errorf("%q is not a duration: add a unit, e.g. %ss", s, s)
			}
			return reflect.Value{}, fmt.Errorf("%q is not a duration (e.g. 500ms, 10s, 1m30s)", s)
		}
		if d < 0 {
			return reflect.Value{}, fmt.Errorf("%q is negative", s)
		}
		return reflect.ValueOf(d), nil
	}
	switch t.Kind() {
	case reflect.String:
		if f.enum != nil {
			l := strings.ToLower(s)
			if !contains(f.enum, l) {
				return reflect.Value{}, fmt.Errorf("%q is not one of %s", s, strings.Join(f.enum, ", "))
			}
			s = l
		}
		return reflect.ValueOf(s).Convert(t), nil
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("%q is not a boolean (true or false)", s)
		}
		return reflect.ValueOf(b), nil
	case reflect.Int:
		n, err := strconv.ParseInt(s, 10, 0)
		if err != nil {
			return reflect.Value{}, fmt.Errorf("%q is not a whole number", s)
		}
		return reflect.ValueOf(int(n)), nil
	}
	return reflect.Value{}, fmt.Errorf("unsupported type %v", t)
}

// Key documents one configuration key.
type Key struct {
	Path    string // YAML path: "segment.refresh_interval"
	Env     string // environment variable: "LEAF_SEGMENT_REFRESH_INTERVAL"
	Flag    string // command-line flag without dashes, "" if none
	Type    string // "string", "bool", "int", "duration", "bool (optional)", "string (list)"
	Default string // the default, as it would be written in YAML; "" if unset
	Enum    []string
	Help    string
}

// Keys lists every configuration key in struct order. etc/leaf.yml must
// document each of them (a test checks).
func Keys() []Key {
	def := Default()
	var keys []Key
	for _, f := range fields() {
		k := Key{Path: f.path, Env: f.env(), Flag: f.flag, Type: typeName(f.typ), Enum: f.enum, Help: f.help}
		if f.list {
			k.Type += " (list)"
		}
		v := reflect.ValueOf(&def).Elem().FieldByIndex(f.index)
		if v.Kind() != reflect.Pointer || !v.IsNil() {
			k.Default = formatValue(def.value(f))
		}
		keys = append(keys, k)
	}
	return keys
}

// KeyPaths lists the YAML path of every key.
func KeyPaths() []string {
	var paths []string
	for _, f := range fields() {
		paths = append(paths, f.path)
	}
	return paths
}

func typeName(t reflect.Type) string {
	suffix := ""
	if t.Kind() == reflect.Pointer {
		t, suffix = t.Elem(), " (optional)"
	}
	if t == durationType {
		return "duration" + suffix
	}
	return t.Kind().String() + suffix
}

func formatValue(v reflect.Value) string {
	if v.Type() == durationType {
		return formatDuration(time.Duration(v.Int()))
	}
	return fmt.Sprint(v.Interface())
}

// formatDuration writes whole seconds as "60s" rather than time's "1m0s",
// matching how the sample file and the docs spell defaults.
func formatDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// Flags binds configuration keys to the flags of one subcommand's FlagSet.
type Flags struct {
	fs     *flag.FlagSet
	file   string
	props  string                // --leaf-properties, if bound
	values map[string]*flagValue // by key path
}

// BindFlags registers --config and the flags of the given key paths (keys
// without a flag tag are skipped; an unknown path panics, a programming
// error). Flag values are checked as they are parsed, so a bad value fails
// FlagSet.Parse like any other bad flag.
func BindFlags(fs *flag.FlagSet, paths ...string) *Flags {
	b := &Flags{fs: fs, values: map[string]*flagValue{}}
	fs.StringVar(&b.file, "config", "", "YAML configuration `file` (default: $"+EnvConfigFile+", else none)")
	for _, path := range paths {
		f, ok := fieldByPath(path)
		if !ok {
			panic("config: BindFlags: unknown key " + path)
		}
		if f.flag == "" {
			continue
		}
		fv := &flagValue{f: f}
		b.values[path] = fv
		fs.Var(fv, f.flag, flagUsage(f))
	}
	return b
}

// BindLeafProperties registers --leaf-properties FILE: Java Leaf's
// leaf.properties, read below the YAML file (Sources.LeafProperties).
func (b *Flags) BindLeafProperties() {
	b.fs.StringVar(&b.props, "leaf-properties", "", "Java Leaf's leaf.properties `file`, read as is below --config (default: none)")
}

// Sources returns what the user set, for Load: the --config and
// --leaf-properties files and only the flags that appeared on the command
// line (FlagSet.Visit), over env.
func (b *Flags) Sources(env []string) Sources {
	src := Sources{LeafProperties: b.props, File: b.file, Env: env, Flags: map[string]string{}}
	b.fs.Visit(func(fl *flag.Flag) {
		for path, fv := range b.values {
			if fl.Value == fv {
				src.Flags[path] = fv.s
			}
		}
	})
	return src
}

func flagUsage(f field) string {
	def := Default()
	usage := f.help
	if d := formatValue(def.value(f)); d != "" {
		usage += " (default " + d + ")"
	}
	return usage + "; env " + f.env()
}

// flagValue holds the raw text of one flag after checking that it parses.
type flagValue struct {
	f field
	s string
}

func (v *flagValue) String() string { return v.s }

func (v *flagValue) Set(s string) error {
	if _, err := parseValue(v.f, s); err != nil {
		return err
	}
	if v.f.list && v.s != "" {
		// Repeated, a list key's flag adds an entry; the whole list still
		// replaces the file's and the environment's.
		v.s += "\n" + s
		return nil
	}
	v.s = s
	return nil
}

// ArgName names the flag's argument in usage text: the accepted values of
// an enum, else the field's arg tag, else "value".
func (v *flagValue) ArgName() string {
	switch {
	case v.IsBoolFlag():
		return ""
	case v.f.enum != nil:
		return strings.Join(v.f.enum, "|")
	case v.f.arg != "":
		return v.f.arg
	}
	return typeName(v.f.typ)
}

// IsBoolFlag lets a boolean key be given as a bare --name.
func (v *flagValue) IsBoolFlag() bool {
	t := v.f.typ
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Bool
}
