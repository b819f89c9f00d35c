package config

import (
	"fmt"

	"github.com/leafgo/leaf/cmd/leaf/internal/leafprops"
)

// Warning is a setting of a leaf.properties file that leaf ignores or
// changes: serve logs it. The file still loads.
type Warning = leafprops.Warning

// applyLeafProperties applies Java Leaf's leaf.properties (file, holding
// data) to c, recording in origin where each key came from. The mapping
// from Java Leaf's keys to ours is package leafprops's; every error wraps
// ErrInvalid and names the file and line.
func (c *Config) applyLeafProperties(file string, data []byte, origin map[string]string) ([]Warning, error) {
	sets, warnings, err := leafprops.Read(file, data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	for _, s := range sets {
		f, ok := fieldByPath(s.Path)
		if !ok {
			// The mapping and the configuration disagree: a bug, not the
			// file's fault.
			return nil, fmt.Errorf("%s: %s maps to %s, which is not a configuration key", s.At, s.Key, s.Path)
		}
		if err := c.set(f, s.Value); err != nil {
			return nil, fmt.Errorf("%w: %s: %s: %v", ErrInvalid, s.At, s.Key, err)
		}
		origin[s.Path] = s.At + ", " + s.Key
	}
	return warnings, nil
}
