package userguide

import (
	"fmt"
	"regexp"
	"strings"
)

// A sample is a fenced output block of the guide, named by the marker line before it:
//
//	<!-- sample: NAME -->
//
// An output block that no test can produce (one captured on a real cluster) says so instead:
//
//	<!-- not a sample: WHY -->
type sample struct {
	name   string
	indent string
	start  int // the first line of the block's text (after the opening fence)
	end    int // the closing fence
}

var (
	fenceRE  = regexp.MustCompile("^(\\s*)```(\\S*)\\s*$")
	markerRE = regexp.MustCompile(`^\s*<!-- (sample: (\S+)|not a sample: .+) -->\s*$`)
)

// samplesOf finds the marked blocks of a guide. A block without a language (an output, not a
// file or commands to type) must be marked one way or the other, so that no output escapes.
func samplesOf(lines []string) ([]sample, error) {
	var out []sample
	lastText := -1 // the last non-blank line before the current one
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			if strings.TrimSpace(lines[i]) != "" {
				lastText = i
			}
			continue
		}
		indent, lang := m[1], m[2]
		end := i + 1
		for end < len(lines) && strings.TrimRight(lines[end], " ") != indent+"```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("line %d: the block opened here is never closed", i+1)
		}
		if lang == "" {
			var mk []string
			if lastText >= 0 {
				mk = markerRE.FindStringSubmatch(lines[lastText])
			}
			switch {
			case mk == nil:
				return nil, fmt.Errorf("line %d: an output block without a marker; put <!-- sample: NAME --> (or <!-- not a sample: WHY -->) on a line before it", i+1)
			case mk[2] != "":
				out = append(out, sample{name: mk[2], indent: indent, start: i + 1, end: end})
			}
		}
		lastText = end
		i = end
	}
	return out, nil
}

// text is a sample's content as the guide has it, without the block's indentation.
func (s sample) text(lines []string) string {
	var b []string
	for _, l := range lines[s.start:s.end] {
		b = append(b, strings.TrimPrefix(l, s.indent))
	}
	return strings.Join(b, "\n")
}

// replaced is the guide with the samples' content replaced by got's, where got has one.
func replaced(lines []string, samples []sample, got map[string]string) []string {
	var out []string
	next := 0
	for _, s := range samples {
		text, ok := got[s.name]
		if !ok {
			continue
		}
		out = append(out, lines[next:s.start]...)
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			if l == "" {
				out = append(out, "")
			} else {
				out = append(out, s.indent+l)
			}
		}
		next = s.end
	}
	return append(out, lines[next:]...)
}

// varying is what changes from one run to the next, and what stands for it when two samples are
// compared.
var varying = []struct {
	re *regexp.Regexp
	to string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "UUID"},
	{regexp.MustCompile(`[0-9a-f]{8}(_[0-9a-f]{4}){3}_[0-9a-f]{12}`), "UUID"}, // in export paths
	{regexp.MustCompile(`manila\.csi\.openstack\.org_\S+`), "PROVISIONER-IDENTITY"},
	// Generated names, before the durations: a suffix such as 9597h reads as one.
	{regexp.MustCompile(`(worker-\d+)-[a-z0-9]{5}\b`), "$1-XXXXX"},
	// The driver's node plugin pods.
	{regexp.MustCompile(`(manila-csi-driver-(nfs-)?node)-[a-z0-9]{5}\b`), "$1-XXXXX"},
	// The demo writers' lines: a count and the time of day.
	{regexp.MustCompile(`line \d+ \d\d:\d\d:\d\d`), "line N HH:MM:SS"},
	{regexp.MustCompile(`\[\s*\d+s\]`), "[T]"},
	{regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ms|s|m|h)\b`), "DURATION"},
	{regexp.MustCompile(`pid \d+`), "pid N"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
	// The address DHCP gave a worker on the storage subnet.
	{regexp.MustCompile(`\b(admits|with) (\d+\.\d+\.\d+)\.\d+\b`), "$1 $2.N"},
	{regexp.MustCompile(`version [^\s,]+`), "version V"},
	{regexp.MustCompile(`(main\.(version|commit))=[^\s']+`), "$1=V"},
	// The binaries' cache is $MANILA_SETUP_CACHE, else $XDG_CACHE_HOME/manila-setup (else
	// ~/.cache/manila-setup): only the folder named after the versions is the product's.
	{regexp.MustCompile(`\S*/((kube|csi|node)/(k8s|manila|operands)[^\s/]*)`), "CACHE/$1"},
	// Other tests share the cloud's project and create shares and networks in it meanwhile.
	{regexp.MustCompile(`\b\d+ shares? (is|are)\b`), "N shares are"},
	{regexp.MustCompile(`\b\d+ (available )?shares?\b`), "N ${1}shares"},
	{regexp.MustCompile(`score \d+`), "score N"},
	{regexp.MustCompile(`Examined \d+ networks?`), "Examined N networks"},
	// make demo lists the classes of the moment, which may include another test's share type.
	{regexp.MustCompile(`StorageClasses csi-manila-[^ ]+(, csi-manila-[^ ]+)*, in `), "StorageClasses LIST, in "},
	// gRPC says either, depending on which side of the call noticed the deadline first.
	{regexp.MustCompile(`code = DeadlineExceeded desc = (context deadline exceeded|stream terminated by RST_STREAM with error code: CANCEL)`), "code = DeadlineExceeded desc = DEADLINE"},
	{regexp.MustCompile(`[ \t]+`), " "},
}

// normalized is a sample with what varies replaced, spaces collapsed (column widths follow the
// varying values) and trailing blanks dropped.
func normalized(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, v := range varying {
			l = v.re.ReplaceAllString(l, v.to)
		}
		out = append(out, strings.TrimRight(l, " "))
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n")
}
