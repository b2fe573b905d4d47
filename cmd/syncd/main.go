// Command syncd is the SSP2 sync server.
package main

import "os"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "inspect" {
		os.Exit(runInspect(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(2)
}
