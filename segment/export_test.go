package segment

import "context"

// Sample takes the rate sample the background loop takes every second, so
// that tests on a fake clock control when samples happen.
func (g *Generator) Sample() { _ = g.sample(context.Background()) }
