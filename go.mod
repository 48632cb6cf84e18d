module github.com/goverbs/goverbs

go 1.26
