package flagdoc

import (
	"bytes"
	"flag"
	"testing"
)

func TestPrint(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Int("batch-size", 100, "messages per `N` call")
	fs.Bool("json", false, "write JSON")
	fs.Duration("pause", 0, "rest between batches")
	var b bytes.Buffer
	Print(&b, fs)
	want := "  --batch-size N\n      messages per N call (default 100)\n  --json\n      write JSON\n  --pause duration\n      rest between batches\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
