package main

import (
	"fmt"
	"os"
)

// main is a placeholder until ibvinfo (issue 5) lands: it says so and fails.
func main() {
	fmt.Fprintln(os.Stderr, "ibvinfo: not implemented yet")
	os.Exit(1)
}
