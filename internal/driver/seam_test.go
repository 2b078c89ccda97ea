package driver_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// layoutWord names the layout in an identifier: a branch on it belongs in
// a driver.
var layoutWord = regexp.MustCompile(`(?i)distributed|routed|citus|layout`)

// The runtime (inbox/, outbox/) has no branch on the layout: no identifier
// of its own code names one (the drivers decide), whatever its comments
// and error texts say.
func TestNoLayoutBranchOutsideTheDrivers(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, dir := range []string{"inbox", "outbox"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				// Sentinel errors (ErrNotDistributed) may say what they are about.
				if id, ok := n.(*ast.Ident); ok && layoutWord.MatchString(id.Name) && !strings.HasPrefix(id.Name, "Err") {
					t.Errorf("%s: %s names the layout: a branch on it belongs in internal/driver", fset.Position(id.Pos()), id.Name)
				}
				return true
			})
		}
	}
}
