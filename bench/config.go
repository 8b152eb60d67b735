package main

import (
	"io"
	"log/slog"
	"time"

	"github.com/sluicedata/sluice/internal/testkit/synth"
)

// config is one run of the harness: the dataset and how hard to measure.
type config struct {
	// Mode names the preset ("full", "quick", "tiny").
	Mode string
	// Spec is the main dataset. The memory scenario streams its first
	// quarter of files and all of it; the transform scenarios its first
	// quarter.
	Spec synth.Spec
	// Reps is how many times each throughput measurement runs; the fastest
	// run is reported (the others are listed), as noise on a shared machine
	// only ever slows a run down.
	Reps int
	// BatchSize is the rows per batch of every scenario, floor included.
	BatchSize int
	// Latency is what the latency scenario adds to every range read, and
	// LatencyFiles how many of the files it streams (the waits make it the
	// slowest scenario; 0 for all).
	Latency      time.Duration
	LatencyFiles int
	// TransformCPU is the pure CPU time the transform scenarios spend on
	// each batch (calibrated at startup).
	TransformCPU time.Duration
	// PeerReps is how many times each peer runs (each run alternating with
	// the matching sluice run), and PeerShuffleSeconds how long the LanceDB
	// shuffled read may take before it stops and projects the epoch from
	// the rows read (0: the whole epoch).
	PeerReps           int
	PeerShuffleSeconds float64
	// SplitsSpec is the data of the splits64 scenario's pageindex and
	// nopageindex lines: row groups of at least 2^18 rows, several times a
	// split's share, so that split boundaries cut them. Each line sets PageIndex or
	// SmallPages on it (the same pages, with and without the index).
	SplitsSpec synth.Spec
	// QueueEvery is how often the shuffled scenario samples the stream's
	// queue depths for the queue plot.
	QueueEvery time.Duration

	DataDir string   // reuse the dataset kept here; "" for a temporary one
	OutDir  string   // write results.jsonl and results.md here; "" for stdout only
	Only    []string // scenarios or groups to run; nil for all
	Log     *slog.Logger
	Profile io.Writer // CPU profile of the scenarios, if not nil
	// PeersDir holds the Node.js peers (package.json, node_modules, the
	// scripts); "" finds bench/peers (see findPeersDir).
	PeersDir string
	// Command is the command line the run was started with, for reports.
	Command string
	// Progress, if not nil, shows a progress bar (on a terminal).
	Progress *progress
}

// quickConfig: 8 files x 250k rows in row groups of 32k rows (2M rows).
func quickConfig() config {
	return config{
		Mode:         "quick",
		Spec:         synth.Spec{Files: 8, RowsPerFile: 250_000, RowGroupRows: 32_768, Seed: 1},
		Reps:         3,
		BatchSize:    1024,
		Latency:      20 * time.Millisecond,
		LatencyFiles: 4,
		TransformCPU: time.Millisecond,
		PeerReps:     2,
		// Random takes run at tens of thousands of rows/s: the epoch would
		// take a minute or more.
		PeerShuffleSeconds: 1.5,
		QueueEvery:         20 * time.Millisecond,
		// About as many rows as Spec (2.1M), in files of four row groups of
		// 262,500 rows (33 MB, where training files are 100 MB to 1 GB: each
		// rank reads every footer, a 64 KiB tail, so smaller files would
		// weigh planning in more): not 2^18, with which every boundary of 64
		// splits would fall on an edge of the writer's 1024-row pages and no
		// page would be fetched by both sides (a best case).
		SplitsSpec: synth.Spec{Files: 2, RowsPerFile: 1_050_000, RowGroupRows: 262_500, Seed: 1},
	}
}

// fullConfig is quickConfig four times over (8M rows in 32 files).
func fullConfig() config {
	c := quickConfig()
	c.Mode = "full"
	c.Spec.Files = 32
	c.LatencyFiles = 8
	c.Reps = 3
	c.PeerReps = 3
	c.PeerShuffleSeconds = 10
	c.SplitsSpec.Files = 8
	return c
}

// tinyConfig runs every scenario on a few thousand rows: a smoke test for
// the harness itself, not a measurement.
func tinyConfig() config {
	c := quickConfig()
	c.Mode = "tiny"
	// Long strings make the files large for their rows: footer reads (a
	// 64 KiB guess each) then weigh in I/O as little as in real files.
	c.Spec = synth.Spec{Files: 4, RowsPerFile: 1500, RowGroupRows: 500, StringBytes: 2048, Seed: 1}
	c.Reps = 1
	c.TransformCPU = 200 * time.Microsecond
	c.PeerReps = 1
	c.PeerShuffleSeconds = 0
	c.QueueEvery = time.Millisecond
	// Row groups of 4096 rows cut by 64 splits of 256 rows, strings long
	// enough that footer reads weigh little. The writer's pages hold 1024
	// rows, four splits' worth, so the page-indexed figures are far above
	// the quick run's: the smoke test checks only that they are below those
	// without the index.
	c.SplitsSpec = synth.Spec{Files: 2, RowsPerFile: 8192, RowGroupRows: 4096, StringBytes: 256, Seed: 1}
	return c
}
