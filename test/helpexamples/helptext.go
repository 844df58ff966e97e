// Package helpexamples finds the manila-setup command lines that a command's --help prints, so
// that tests can check each one parses (cmd/manila-setup) and runs (this package's integration
// test) exactly as printed.
package helpexamples

import (
	"regexp"
	"strings"
)

// Program is the name examples start with.
const Program = "manila-setup"

// Where an example was found in a help text.
const (
	FromDescription = "description" // an indented line of Long, or a quoted command in it
	FromUsage       = "usage"       // the usage line (cobra's Use with the command path)
	FromExamples    = "examples"    // the Example field
	FromFlags       = "flags"       // a quoted command in a flag's help
)

// Example is one manila-setup command line printed by a command's help.
type Example struct {
	Source string // one of the From* constants
	Line   string // the command as printed, from "manila-setup", continuation lines joined
	// Args are Line's words after "manila-setup": placeholders such as <storage network ID>
	// become one word, and in a synopsis brackets are dropped and a|b alternatives become
	// separate words.
	Args []string
	// Synopsis is a line that shows a command's shape ([optional] parts, a|b, NAME...) rather
	// than a command to type: its flags must exist and take the values shown, but its
	// arguments are not checked against the command's and it is never run.
	Synopsis bool
}

// sectionHeaderRE is a line of cobra's help that starts a section: "Usage:", "Flags:",
// "Examples:", and the titles of command groups.
var sectionHeaderRE = regexp.MustCompile(`^[A-Z][A-Za-z ]*:$`)

// FromHelp finds the examples of one command's help output (cobra's default template): the
// indented manila-setup lines of the description, its usage lines, every line of Examples, and
// commands quoted ('...', "..." or `...`) in the description or in a flag's help.
func FromHelp(help string) []Example {
	lines := joinContinuations(strings.Split(help, "\n"))
	var out []Example
	section := "" // "" is the description, before "Usage:"
	for _, l := range lines {
		if isHeader(section, l) {
			section = strings.TrimSuffix(l, ":")
			continue
		}
		switch section {
		case "":
			if indented(l) {
				out = append(out, occurrences(l, FromDescription)...)
			} else {
				out = append(out, quoted(l, FromDescription)...)
			}
		case "Usage":
			if ex, ok := usageLine(l); ok {
				out = append(out, ex)
			}
		case "Examples":
			out = append(out, occurrences(l, FromExamples)...)
		case "Flags", "Global Flags":
			// Flags are indented; the footer `Use "manila-setup [command] --help" for more
			// information` is not, and is cobra's own.
			if indented(l) {
				out = append(out, quoted(l, FromFlags)...)
			}
		}
	}
	return out
}

// Subcommands are the names a group's help lists under "Available Commands:" or a command
// group's title, in the order shown.
func Subcommands(help string) []string {
	var names []string
	section := ""
	for _, l := range strings.Split(help, "\n") {
		if isHeader(section, l) {
			section = strings.TrimSuffix(l, ":")
			continue
		}
		switch section {
		case "", "Usage", "Aliases", "Examples", "Flags", "Global Flags", "Additional help topics":
			continue
		}
		if f := strings.Fields(l); indented(l) && len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// isHeader says whether l starts a section. The description is free text (its "Deploy it
// with:" is no section): the sections start with "Usage:".
func isHeader(section, l string) bool {
	if section == "" {
		return l == "Usage:"
	}
	return sectionHeaderRE.MatchString(l)
}

func indented(l string) bool { return strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t") }

// joinContinuations joins a line that ends with a backslash to the next, as a shell does.
func joinContinuations(lines []string) []string {
	var out []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		for strings.HasSuffix(strings.TrimRight(l, " "), `\`) && i+1 < len(lines) {
			i++
			l = strings.TrimRight(strings.TrimSuffix(strings.TrimRight(l, " "), `\`), " ") + " " + strings.TrimSpace(lines[i])
		}
		out = append(out, l)
	}
	return out
}

// programRE is "manila-setup" as a command (not manila-setup-operator, not a path), and the
// character before it, which says whether it is quoted.
var programRE = regexp.MustCompile("(^|[\\s(\"'`])" + Program + `(\s|$)`)

// occurrences finds each manila-setup command in a shell line: from the program's name to the
// end of the line, a pipe, a comment, a subshell's end, or the closing quote when quoted.
func occurrences(line, source string) []Example {
	var out []Example
	for _, m := range programRE.FindAllStringSubmatchIndex(line, -1) {
		start := m[3] // after the character before the name
		open := ""
		if m[2] < m[3] {
			open = line[m[2]:m[3]]
		}
		rest := line[start:]
		switch open {
		case `"`, "'", "`":
			end := strings.Index(rest, open)
			if end < 0 {
				continue // a quote around prose, not a command
			}
			rest = rest[:end]
		default:
			rest = cutAtShell(rest)
		}
		if ex, ok := parseLine(strings.TrimSpace(rest), source); ok {
			out = append(out, ex)
		}
	}
	return out
}

// quoted finds only the quoted manila-setup commands of a line of prose.
func quoted(line, source string) []Example {
	var out []Example
	for _, ex := range occurrences(line, source) {
		if strings.Contains(line, "'"+ex.Line+"'") || strings.Contains(line, `"`+ex.Line+`"`) || strings.Contains(line, "`"+ex.Line+"`") {
			out = append(out, ex)
		}
	}
	return out
}

// cutAtShell ends a command where the shell would: " | ", " #", ";", "&&" or ")". In a synopsis,
// "[--name N... | --selector L]" is one part: nothing inside brackets ends it.
func cutAtShell(s string) string {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '[':
			depth++
		case s[i] == ']' && depth > 0:
			depth--
		case depth > 0:
		case s[i] == ';' || s[i] == ')' || strings.HasPrefix(s[i:], " | ") || strings.HasPrefix(s[i:], " #") || strings.HasPrefix(s[i:], "&&"):
			return s[:i]
		}
	}
	return s
}

// usageLine is cobra's usage line as an example, without the [flags] cobra appends; the line
// "manila-setup X [command]" that says a group has subcommands is not one.
func usageLine(l string) (Example, bool) {
	l = strings.TrimSpace(l)
	if !strings.HasPrefix(l, Program) || strings.HasSuffix(l, "[command]") {
		return Example{}, false
	}
	l = strings.TrimSpace(strings.TrimSuffix(l, "[flags]"))
	ex, ok := parseLine(l, FromUsage)
	ex.Synopsis = true
	return ex, ok
}

var placeholderRE = regexp.MustCompile(`<[^<>]+>`)

// parseLine splits a command line "manila-setup ..." into its arguments.
func parseLine(line, source string) (Example, bool) {
	if !strings.HasPrefix(line, Program) {
		return Example{}, false
	}
	ex := Example{Source: source, Line: line}
	rest := strings.TrimPrefix(line, Program)
	ex.Synopsis = strings.ContainsAny(rest, "[]") || regexp.MustCompile(`\S\|\S`).MatchString(rest)
	// <storage network ID> is one value.
	rest = placeholderRE.ReplaceAllStringFunc(rest, func(p string) string {
		return strings.ReplaceAll(strings.Trim(p, "<>"), " ", "_")
	})
	if ex.Synopsis {
		rest = strings.NewReplacer("[", " ", "]", " ", "|", " ", "...", "").Replace(rest)
	}
	ex.Args = shellWords(rest)
	return ex, true
}

// shellWords splits s into words as a shell does for simple quoting: '...' and "..." hold
// spaces and are removed.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	quote := rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
