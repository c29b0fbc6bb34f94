module github.com/eddyflow/eddy

go 1.26
