package checkpoint

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"io"
	"iter"
	"math"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// A step summary is a step judged once, for every rank that resumes from
// it: without it each of W resuming ranks lists the step and reads every
// rank's state to judge it, W² reads for the job; with it each reads the
// marker and the summary and lists the step. It holds the step's merged
// state, the world size and incarnation of the marker it was judged with,
// and the MD5 of every rank's state as judged.
//
// One saver of the step writes it: the first of those that find every rank
// stored to claim it (a conditional write), after judging the step as a
// resuming rank would (assessKind) and before writing the marker. A
// resuming rank takes it only where the marker is the one it was judged
// with and the step's listing shows every rank's state unchanged since (the
// same ranks, each with the MD5 the summary holds): a state rewritten or
// damaged since, or another start's saved over it, makes every rank judge
// the step from its states, as without summaries, and so all alike. A
// summary that is missing, does not decode or cannot be checked (a bucket
// whose listings give no MD5) is no summary. Abandon deletes the summary
// and its claim with the marker of a step it abandons.
//
// Only a bucket store keeps summaries: a store on one machine reads its
// states at the cost of local reads.

// summaryBackend is a Backend that can keep step summaries: it creates a
// key only where it has no value, in one step that other processes see,
// and its listings give each key's MD5.
type summaryBackend interface {
	Backend
	create(ctx context.Context, key string, value []byte) (bool, error)
	listMD5(ctx context.Context, prefix string) iter.Seq2[keyMD5, error]
}

// keyMD5 is a key and the MD5 of its value; MD5 is nil where the listing
// does not give it.
type keyMD5 struct {
	key string
	md5 []byte
}

func (b bucketBackend) create(ctx context.Context, key string, value []byte) (bool, error) {
	err := b.bucket.WriteAll(ctx, key, value, &blob.WriterOptions{IfNotExist: true})
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return false, nil
	}
	return err == nil, err
}

func (b bucketBackend) listMD5(ctx context.Context, prefix string) iter.Seq2[keyMD5, error] {
	return func(yield func(keyMD5, error) bool) {
		it := b.bucket.List(&blob.ListOptions{Prefix: prefix})
		for {
			obj, err := it.Next(ctx)
			if err != nil {
				if !errors.Is(err, io.EOF) {
					yield(keyMD5{}, err)
				}
				return
			}
			if !yield(keyMD5{key: obj.Key, md5: obj.MD5}, nil) {
				return
			}
		}
	}
}

const (
	summarySuffix = ".summary"
	claimSuffix   = ".claim"
	summaryMagic  = "sluice step summary\n"
)

// summaryKeys are the keys of a step's summary and of its claim, beside
// the step's marker; "" where the store keeps no summaries.
func (s *store) summaryKeys(run string, step int64) (summary, claim string) {
	marker := s.keys.MarkerKey(run, step)
	if _, ok := s.b.(summaryBackend); !ok || marker == "" {
		return "", ""
	}
	return marker + summarySuffix, marker + claimSuffix
}

// summarize writes the step's summary where this saver is the first to
// claim it and the step is complete with the marker it is about to get. A
// failure leaves the step without a summary, which costs the resuming
// ranks their reads and nothing else: it is not the save's.
func (s *store) summarize(ctx context.Context, run string, step int64, world int, incarnation string) {
	key, claim := s.summaryKeys(run, step)
	if key == "" {
		return
	}
	if won, err := s.b.(summaryBackend).create(ctx, claim, []byte(incarnation)); err != nil || !won {
		return
	}
	rankNos, _, err := s.listStep(ctx, run, step)
	if err != nil {
		return
	}
	ranks := s.readRanks(ctx, run, step, rankNos)
	info, merged, err := judgeStep(datasetKind, run, step, ranks, stepMarker{world: world, incarnation: incarnation})
	if err != nil || !info.Complete {
		return
	}
	enc, err := Encode(merged)
	if err != nil {
		return
	}
	b := append([]byte(summaryMagic), markerBytes(world, incarnation)...)
	b = binary.AppendUvarint(b, uint64(len(ranks)))
	for _, r := range ranks {
		sum := md5.Sum(r.data)
		b = append(binary.AppendUvarint(b, uint64(r.rank)), sum[:]...)
	}
	_ = s.b.Put(ctx, key, append(b, enc...))
}

// readSummary returns the step's merged state from its summary, where it
// has one made with marker m and every rank's state is as it was judged;
// false where it has none that holds.
func (s *store) readSummary(ctx context.Context, run string, step int64, m stepMarker) (State, bool) {
	key, _ := s.summaryKeys(run, step)
	if key == "" || m.world <= 0 {
		return State{}, false
	}
	b, err := s.b.Get(ctx, key)
	if err != nil {
		return State{}, false
	}
	sums, merged, ok := decodeSummary(b, m)
	if !ok {
		return State{}, false
	}
	prefix := s.keys.StepPrefix(run, step)
	seen := 0
	for obj, err := range s.b.(summaryBackend).listMD5(ctx, prefix) {
		if err != nil {
			return State{}, false
		}
		r, isRank := s.keys.ParseRank(obj.key[len(prefix):])
		if !isRank {
			continue
		}
		sum, ok := sums[r]
		if !ok || !bytes.Equal(obj.md5, sum[:]) {
			return State{}, false // changed, added, or no MD5 to tell
		}
		seen++
	}
	if seen != len(sums) {
		return State{}, false // a rank judged is gone
	}
	return merged, true
}

// decodeSummary reads a summary made with marker m: the MD5 of each rank's
// state and the merged state. Its bytes come from a bucket: anything amiss
// is no summary.
func decodeSummary(b []byte, m stepMarker) (map[int][md5.Size]byte, State, bool) {
	rest, ok := bytes.CutPrefix(b, []byte(summaryMagic))
	if !ok {
		return nil, State{}, false
	}
	line, rest, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return nil, State{}, false
	}
	if got, ok := parseMarker(line); !ok || got != m {
		return nil, State{}, false
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest))/(md5.Size+1) {
		return nil, State{}, false
	}
	rest = rest[k:]
	sums := make(map[int][md5.Size]byte, n)
	for range n {
		r, k := binary.Uvarint(rest)
		if k <= 0 || r > math.MaxInt32 || len(rest) < k+md5.Size {
			return nil, State{}, false
		}
		sums[int(r)] = [md5.Size]byte(rest[k : k+md5.Size])
		rest = rest[k+md5.Size:]
	}
	merged, err := Decode(rest)
	if err != nil || merged.WorldSize != m.world || merged.Incarnation != m.incarnation || len(sums) < m.world {
		return nil, State{}, false
	}
	return sums, merged, true
}
