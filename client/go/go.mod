module semd.example/semd

go 1.19
