// Package cputime reads the CPU time the process has used: the fetch stage
// tells a fetch that waits from one that runs by it, and the bench reports
// it beside each line's wall time.
package cputime
