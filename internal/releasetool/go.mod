module github.com/pginbox/pginbox/internal/releasetool

go 1.26.0

require golang.org/x/mod v0.43.0

require golang.org/x/tools v0.52.1-0.20261106145633-d407941a339a // indirect
