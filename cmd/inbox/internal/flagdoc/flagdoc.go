// Package flagdoc writes a flag set's flags the way pginbox's docs spell
// them: --name ARG, the usage on the next line, then the default.
package flagdoc

import (
	"flag"
	"fmt"
	"io"
)

// Print writes every flag of fs to w.
func Print(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if !IsBool(f.Value) {
			line += " " + arg
		}
		fmt.Fprintf(w, "%s\n      %s", line, usage)
		switch f.DefValue {
		case "", "0", "0s", "false":
		default:
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

// IsBool reports whether v is a boolean flag, which takes no argument.
func IsBool(v flag.Value) bool {
	b, ok := v.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
