// Package layers holds no code: its test holds the house to docs/design.md,
// the rooms each package may import, the bound of eight of the project's
// packages per package, and the size bounds a reader relies on (no function
// over 150 lines, package stream's own code under 3,000 lines). A move that
// breaks the design fails here, not in a review.
package layers
