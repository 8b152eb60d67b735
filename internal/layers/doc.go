// Package layers holds no code: its test holds the house to docs/design.md,
// the rooms each package may import, the bound of eight of the project's
// packages per package, the test kit kept apart from the library (no
// library code imports internal/testkit, no internal package the library
// links imports stream), and the size bounds a reader relies on (no
// function over 150 lines or over eight parameters, package stream's own
// code under 3,000 lines). A move that breaks the design fails here, not in
// a review.
package layers
