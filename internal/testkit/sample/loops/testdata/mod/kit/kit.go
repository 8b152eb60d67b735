package kit

import "testing"

// Few is what a sampled loop calls, in another package.
func Few(n int) int {
	if testing.Short() {
		return 1
	}
	return n
}

type Set struct{}

// Draw reaches testing.Short through a method.
func (Set) Draw() int { return Few(3) }

func Plain() int { return 3 }
