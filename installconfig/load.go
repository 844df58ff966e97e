package installconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manila-setup/manila-setup/internal/yamlsplice"
)

// File is a loaded install-config: the bytes as read and their YAML node tree, which keeps
// comments, key order, quoting and positions, so that patch can change the file surgically.
type File struct {
	// Name is how messages refer to the file ("install-config.yaml", "<stdin>").
	Name string
	// Data is the file as read, byte for byte.
	Data []byte

	bom   []byte // a UTF-8 byte order mark at the start of Data, kept on write
	body  []byte // Data without the BOM: what node positions refer to
	utf16 bool   // UTF-16 with a BOM: readable, but positions do not map to bytes

	doc  *yaml.Node // the first document node; nil when the file is empty
	root *yaml.Node // doc's content (alias-free: a document cannot be an alias)

	loadProblems Problems // what Parse found
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Parse loads an install-config from data. It never panics. A file that cannot be checked
// any further (malformed YAML, empty) comes back with an error Problem and a File whose
// Root is nil; warnings (a second document) come with a usable File.
func Parse(name string, data []byte) (f *File, problems Problems) {
	f = &File{Name: name, Data: data, body: data}
	defer func() { f.loadProblems = problems }()
	if bytes.HasPrefix(data, utf8BOM) {
		f.bom, f.body = data[:3], data[3:]
	} else if bytes.HasPrefix(data, []byte{0xFE, 0xFF}) || bytes.HasPrefix(data, []byte{0xFF, 0xFE}) {
		f.utf16 = true
	}

	input := f.body
	if f.utf16 {
		input = data
	}
	docs, err := decodeDocuments(input, 2)
	if err != nil {
		if len(docs) == 0 {
			return f, Problems{f.syntaxProblem(input, err)}
		}
		// The first document is fine; what follows it is not.
		problems = append(problems, f.syntaxProblem(input, err))
	}
	if len(docs) == 0 || len(docs[0].Content) == 0 {
		return f, Problems{newProblem(SeverityError, RuleEmpty, field.ErrorTypeRequired, "", nil,
			"the file is empty: it holds no install-config", 0, 0)}
	}
	f.doc = docs[0]
	root := docs[0].Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return f, Problems{newProblem(SeverityError, RuleEmpty, field.ErrorTypeRequired, "", nil,
			"the document is null: the file holds no install-config", root.Line, root.Column)}
	}
	f.root = root
	if len(docs) > 1 && len(docs[1].Content) > 0 && !isNull(docs[1].Content[0]) {
		problems = append(problems, newProblem(SeverityWarning, RuleExtraDocument, field.ErrorTypeInvalid, "", nil,
			fmt.Sprintf("line %d: a second YAML document starts here; the installer reads only the first one", docs[1].Line),
			docs[1].Line, docs[1].Column))
	}
	return f, problems
}

// Root is the document's top-level node, nil when the file could not be loaded.
func (f *File) Root() *yaml.Node { return f.root }

// decodeDocuments decodes up to max documents. It turns any panic of the YAML library into an
// error, so that no input can crash the command.
func decodeDocuments(data []byte, max int) (docs []*yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: %v", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for len(docs) < max {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return docs, err
		}
		docs = append(docs, &n)
	}
	return docs, nil
}

// parseFails reports whether data fails to parse with exactly the message msg.
func parseFails(data []byte, msg string) bool {
	_, err := decodeDocuments(data, 1<<30)
	return err != nil && yamlMessage(err) == msg
}

var (
	yamlLinePrefix = regexp.MustCompile(`^yaml: (line \d+: )?`)
	unknownAnchor  = regexp.MustCompile(`^unknown anchor '(.*)' referenced$`)
)

// yamlMessage is the YAML library's error without its "yaml: line N:" prefix, whose line
// number is not reliable (it is off by one for parser errors and missing on the first line).
func yamlMessage(err error) string {
	return yamlLinePrefix.ReplaceAllString(err.Error(), "")
}

// syntaxProblem turns a YAML error into a problem with a line and column. The YAML library
// reports neither reliably, so this finds the shortest prefix of the file that fails with the
// same message: first by whole lines, then by bytes within the failing line.
func (f *File) syntaxProblem(input []byte, err error) Problem {
	msg := yamlMessage(err)
	line, col := 0, 0
	if !f.utf16 {
		line, col = locateSyntaxError(input, msg)
	}
	detail := "malformed YAML: " + msg
	if line > 0 && col > 0 && strings.Contains(msg, "cannot start any token") {
		if text := yamlsplice.New(input).Line(line); col-1 < len(text) && strings.HasPrefix(strings.TrimLeft(text, " "), "\t") {
			detail += " (a tab: YAML indents with spaces only)"
		}
	}
	if line > 0 {
		detail = fmt.Sprintf("line %d, column %d: %s", line, col, detail)
	}
	return newProblem(SeverityError, RuleYAMLSyntax, field.ErrorTypeInvalid, "", nil, detail, line, col)
}

func locateSyntaxError(data []byte, msg string) (line, col int) {
	starts := yamlsplice.LineStarts(data)
	n := len(starts)
	cut := func(l int) int { // end of the first l lines
		if l >= n {
			return len(data)
		}
		return starts[l]
	}
	if !parseFails(data, msg) {
		return 0, 0
	}
	// Smallest number of whole lines that fails with msg.
	lo, hi := 1, n
	for lo < hi {
		mid := (lo + hi) / 2
		if parseFails(data[:cut(mid)], msg) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	line = lo
	start, end := starts[line-1], cut(line)
	text := data[start:end]
	// Within that line, the shortest prefix that fails. Messages about the end of the stream
	// (an unclosed quote or bracket) fail for every prefix cut inside a quoted scalar, so for
	// them point at the first quote or bracket instead.
	byteCol := -1
	if strings.Contains(msg, "end of stream") || strings.Contains(msg, "did not find expected ','") {
		if i := bytes.IndexAny(text, "\"'[{"); i >= 0 {
			byteCol = i
		}
	} else {
		lo, hi := 1, len(text)
		for lo < hi {
			mid := (lo + hi) / 2
			if parseFails(data[:start+mid], msg) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		if parseFails(data[:start+lo], msg) {
			byteCol = lo - 1
		}
	}
	if m := unknownAnchor.FindStringSubmatch(msg); m != nil {
		if i := bytes.Index(text, []byte("*"+m[1])); i >= 0 {
			byteCol = i
		}
	}
	if strings.Contains(msg, "cannot start any token") {
		// Most often a tab in the indentation: point at it.
		if i := bytes.IndexByte(text, '\t'); i >= 0 && len(bytes.TrimLeft(text[:i], " ")) == 0 {
			byteCol = i
		}
	}
	if byteCol < 0 || byteCol >= len(text) || isSpaceOrBreak(text[byteCol]) && text[byteCol] != '\t' {
		// Point at the first character of the line instead.
		byteCol = len(text) - len(bytes.TrimLeft(text, " \t"))
	}
	return line, utf8.RuneCount(text[:byteCol]) + 1
}

func isSpaceOrBreak(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}
