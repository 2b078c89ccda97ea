package doccheck

import "strings"

// elision is the block line that stands for any number of the file's lines.
const elision = "// ..."

// MatchExcerpt reports whether the excerpt's lines appear in file in order,
// each run between two "// ..." lines as consecutive lines of the file.
// Lines compare without leading and trailing white space, and blank lines do
// not count. On a mismatch it returns the first line of the run not found.
func MatchExcerpt(excerpt, file string) (missing string, ok bool) {
	fileLines := significant(file)
	var runs [][]string
	var cur []string
	for _, l := range significant(excerpt) {
		if l == elision {
			runs = append(runs, cur)
			cur = nil
			continue
		}
		cur = append(cur, l)
	}
	runs = append(runs, cur)
	at := 0
	for _, run := range runs {
		if len(run) == 0 {
			continue
		}
		i := indexRun(fileLines[at:], run)
		if i < 0 {
			return run[0], false
		}
		at += i + len(run)
	}
	return "", true
}

func significant(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if t := strings.TrimSpace(l); t != "" {
			out = append(out, t)
		}
	}
	return out
}

func indexRun(lines, run []string) int {
	for i := 0; i+len(run) <= len(lines); i++ {
		match := true
		for j := range run {
			if lines[i+j] != run[j] {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}
