package inmem_test

import (
	"testing"
	"time"

	"github.com/leafgo/leaf/inmem"
	"github.com/leafgo/leaf/leaftest"
)

func TestWorkerPool(t *testing.T) {
	leaftest.TestWorkerRegistry(t, func(t *testing.T) leaftest.RegistryOpener {
		return inmem.NewWorkerPool(10 * time.Second).Open
	}, leaftest.RegistryTraits{Leases: true})
}
