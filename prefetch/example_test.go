package prefetch_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicedata/sluice/prefetch"
)

// Two stages chained as a stream chains them: "read" decodes chunks ahead of the consumer with
// four goroutines, "transform" applies the user's function with two. Results arrive in input
// order whatever the timing.
func ExampleMap() {
	ctx := context.Background()
	chunks := prefetch.FromSeq(slices.Values([]string{"a,b", "c", "d,e,f"}))

	read := prefetch.Stage[string, []string]{
		Name:        "read",
		Concurrency: 4,
		Ahead:       8,
		Fn: func(_ context.Context, chunk string) ([]string, error) {
			return strings.Split(chunk, ","), nil
		},
	}
	transform := prefetch.Stage[[]string, string]{
		Name:        "transform",
		Concurrency: 2,
		Fn: func(_ context.Context, rows []string) (string, error) {
			return strings.ToUpper(strings.Join(rows, "")), nil
		},
	}

	for batch, err := range prefetch.Map(ctx, prefetch.Map(ctx, chunks, read), transform) {
		if err != nil {
			fmt.Println("error:", err)
			break
		}
		fmt.Println(batch)
	}
	// Output:
	// AB
	// C
	// DEF
}
