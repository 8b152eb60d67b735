package checkpoint

import "fmt"

// validateSkipped checks State.Skipped: none, or one count per split, none
// negative.
func (s *State) validateSkipped() error {
	if s.Skipped == nil {
		return nil
	}
	if len(s.Skipped) != s.NumSplits {
		return fmt.Errorf("checkpoint: state has %d skipped counts for num_splits %d", len(s.Skipped), s.NumSplits)
	}
	for i, n := range s.Skipped {
		if n < 0 {
			return fmt.Errorf("checkpoint: state skipped count %d is negative", i)
		}
	}
	return nil
}

// TotalSkipped is the rows left out as bad in the splits the state speaks
// for (see State.Skipped).
func (s *State) TotalSkipped() int64 {
	var n int64
	for split, k := range s.Skipped {
		if s.Owns(split) {
			n += k
		}
	}
	return n
}

// hasSkipped reports whether any split counts a skipped row: only then does
// a state need format version 2.
func (s *State) hasSkipped() bool {
	for _, n := range s.Skipped {
		if n != 0 {
			return true
		}
	}
	return false
}

// int64s reads an array of integers; an empty one reads as nil.
func (r *payloadReader) int64s(what field) ([]int64, error) {
	n, err := r.arrayLen(what, 1)
	if err != nil || n == 0 {
		return nil, err
	}
	out := make([]int64, n)
	for i := range out {
		if out[i], err = r.int64(field{name: what.name, index: i}); err != nil {
			return nil, err
		}
	}
	return out, nil
}
