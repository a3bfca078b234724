package main

import "flag"

// flagsTable is the flag reference of a FlagSet: each flag, sorted by name
// as --help prints them, with its default (none when empty) and its usage
// string.
func flagsTable(fs *flag.FlagSet) string {
	var rows [][]string
	fs.VisitAll(func(f *flag.Flag) {
		rows = append(rows, []string{code("--" + f.Name), code(f.DefValue), cell(f.Usage)})
	})
	return table([]string{"flag", "default", "meaning"}, rows)
}
