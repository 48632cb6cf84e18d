// Package cpuprofile writes a CPU profile of a goverbs command when the
// environment asks for one: GOVERBS_CPUPROFILE=file. A profile shows where
// a run's user time goes and is the input of a profile-guided build
// (test/perf/pgo.sh takes them in one rig boot); rdma-core's tools have no
// such switch, so the commands take it from the environment and keep
// their command lines rdma-core's.
package cpuprofile

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
)

// Env is the variable Start reads.
const Env = "GOVERBS_CPUPROFILE"

// Run runs a command's body under the profile Env asks for and returns
// its exit code, the profile written: a main calls
// os.Exit(cpuprofile.Run(...)) (os.Exit runs no deferred calls).
func Run(body func() int) int {
	stop := Start()
	code := body()
	stop()
	return code
}

// Start starts the profile if Env names a file, and returns the function
// that stops it and closes the file (a no-op otherwise). A profile that
// cannot be written is reported on stderr and the command runs on
// without it.
func Start() (stop func()) { return start(os.Getenv(Env), os.Stderr) }

func start(path string, stderr io.Writer) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v (running without a profile)\n", Env, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", Env, err)
		}
	}
}
