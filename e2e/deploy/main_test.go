package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestMain runs the tests in the kit's directory, deploy/ of the leaf
// module (this module sits in its e2e/).
func TestMain(m *testing.M) {
	if err := os.Chdir(filepath.Join("..", "..", "deploy")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
