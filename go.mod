module github.com/goverbs/goverbs

go 1.26.0

require golang.org/x/sys v0.49.0

require golang.org/x/net v0.62.0
