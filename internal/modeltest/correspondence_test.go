package modeltest

import (
	"os"
	"strings"
	"testing"
)

func load(t *testing.T) (map[string]string, *Model) {
	t.Helper()
	stmts, err := Statements("../../queries")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../../model/receipts.qnt")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseModel(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return stmts, m
}

// Every statement of queries/ has its model action, and every action of the
// model is a statement or a named step.
func TestStatementsMatchModel(t *testing.T) {
	stmts, m := load(t)
	for _, p := range Mismatches(stmts, m) {
		t.Error(p)
	}
	t.Logf("%d statements, %d model moves", len(stmts), len(m.Moves))
}

// The check fails for a new statement the model does not know, a write
// listed as a read, and a model action nothing stands for.
func TestMismatchesCatch(t *testing.T) {
	stmts, m := load(t)
	stmts["ReceiptSteal"] = "-- name: ReceiptSteal :exec\nUPDATE pginbox_work SET claim_token = NULL;\n"
	m.Table["ReceiptSneak"] = Read
	stmts["ReceiptSneak"] = "-- name: ReceiptSneak :exec\n-- no writes here, says the comment\nDELETE FROM pginbox_work;\n"
	m.Moves = append(m.Moves, "teleport")
	got := strings.Join(Mismatches(stmts, m), "\n")
	for _, want := range []string{"statement ReceiptSteal has no model action", "ReceiptSneak is listed as a read but runs DELETE FROM", "model action teleport is no statement"} {
		if !strings.Contains(got, want) {
			t.Errorf("mismatches lack %q:\n%s", want, got)
		}
	}
}
