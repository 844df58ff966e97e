package wizard

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// networkModel is screen 2: the storage network, with the discovered one preselected.
type networkModel struct {
	fixedWords
	loading bool
	err     string
	rows    []netRow
	shown   []int // indexes of rows that match the filter
	cursor  int   // index into shown

	filter    string
	filtering bool
	// none says why no network is preselected (discovery found no candidate).
	none string

	// disc and nodeAddrs judge a choice (openstack.Discovery.NetworkProblem); confirming is
	// the problem of the network chosen, while the wizard asks whether to go on (default no).
	disc       *openstack.Discovery
	nodeAddrs  []netip.Addr
	confirming string
	// fitness is what the cluster tells attach.Fitness (its networks and VIPs).
	fitness attach.FitnessOptions
}

// newNetworkModel is the network screen waiting for discovery.
func newNetworkModel() networkModel {
	return networkModel{fixedWords: fixedWords(stepNetwork), loading: true}
}

type netRow struct {
	net  openstack.Network
	cand *openstack.Candidate
	hay  string // what the filter searches: name, ID, CIDRs, lower case
}

// withDiscovery fills the list: candidates first (best first), then the others by name.
func (n networkModel) withDiscovery(d *openstack.Discovery, errText string) networkModel {
	n.loading, n.err = false, errText
	n.rows, n.disc, n.confirming = nil, d, ""
	if d == nil {
		n.shown = nil
		return n
	}
	if len(d.Candidates) == 0 {
		n.none = "Discovery found no network Manila exports on"
		if len(d.Notes) > 0 {
			n.none += ": " + strings.Join(d.Notes, "; ")
		}
		n.none += ". Choose the storage network yourself, or ask the cloud's administrators which one it is."
	} else if _, err := d.StorageNetwork(); err != nil {
		// The same rule as installconfig patch --discover and the operator: nothing is chosen
		// for the admin on a guess or a tie; the first candidate is only where the cursor starts.
		n.none = upperFirst(err.Error()) + ". Check which network the storage is on before you go on."
	}
	seen := map[string]bool{}
	for i := range d.Candidates {
		c := &d.Candidates[i]
		n.rows = append(n.rows, newNetRow(c.Network, c))
		seen[c.Network.ID] = true
	}
	for _, nw := range d.Networks {
		if !seen[nw.ID] {
			n.rows = append(n.rows, newNetRow(nw, nil))
		}
	}
	n = n.refilter()
	n.cursor = 0
	return n
}

func newNetRow(nw openstack.Network, c *openstack.Candidate) netRow {
	parts := []string{nw.Name, nw.ID}
	for _, p := range nw.CIDRs() {
		parts = append(parts, p.String())
	}
	return netRow{net: nw, cand: c, hay: strings.ToLower(strings.Join(parts, " "))}
}

// refilter recomputes the rows that match the filter, keeping the cursor on the same network
// when it still matches.
func (n networkModel) refilter() networkModel {
	cur := -1
	if n.cursor < len(n.shown) {
		cur = n.shown[n.cursor]
	}
	q := strings.ToLower(strings.TrimSpace(n.filter))
	shown := n.shown[:0:0]
	n.cursor = 0
	for i := range n.rows {
		if q == "" || strings.Contains(n.rows[i].hay, q) {
			if i == cur {
				n.cursor = len(shown)
			}
			shown = append(shown, i)
		}
	}
	n.shown = shown
	return n
}

// chosen is the network under the cursor, nil when there is none.
func (n networkModel) chosen() *openstack.Network {
	if r := n.current(); r != nil {
		return &r.net
	}
	return nil
}

func (n networkModel) chosenCandidate() *openstack.Candidate {
	if r := n.current(); r != nil {
		return r.cand
	}
	return nil
}

func (n networkModel) current() *netRow {
	if n.cursor < len(n.shown) {
		return &n.rows[n.shown[n.cursor]]
	}
	return nil
}

// The network screen's keys.
var (
	networkChoose  = bind("enter", "choose", "enter")
	networkFilter  = told("type or /", "filter")
	networkTyping  = told("type", "filter")
	networkDone    = bind("enter", "done", "enter")
	networkClear   = bind("esc", "clear", "esc")
	networkAnyway  = bind("y", "attach it anyway", keyYes.Keys()...)
	networkAnother = told("n, enter or esc", "choose another")
	// networkArrows leave the filter and move (j and k are typed into it); networkErase
	// takes back the last character typed.
	networkArrows = bind("↑/↓", "move", "up", "down")
	networkErase  = bind("backspace", "erase", "backspace")
)

// networkMoves are the keys that move the cursor over the list.
var networkMoves = []key.Binding{keyUp, keyDown, keyPgUp, keyPgDown, keyTop, keyBottom}

func (n networkModel) key(s *session, k tea.KeyMsg) (networkModel, tea.Cmd) {
	if n.confirming != "" {
		// Only an explicit yes goes on; anything else is the default, no.
		n.confirming = ""
		if key.Matches(k, networkAnyway) {
			return n, nav(1)
		}
		return n, nil
	}
	if n.filtering {
		switch {
		case key.Matches(k, networkClear):
			n.filtering, n.filter = false, ""
			return n.refilter(), nil
		case key.Matches(k, networkDone):
			n.filtering = false
			return n, nil
		case key.Matches(k, networkArrows):
			n.filtering = false
			return n.key(s, k)
		case key.Matches(k, networkErase):
			if r := []rune(n.filter); len(r) > 0 {
				n.filter = string(r[:len(r)-1])
			}
			return n.refilter(), nil
		case k.Type == tea.KeyRunes || k.Type == tea.KeySpace:
			n.filter += string(k.Runes)
			return n.refilter(), nil
		}
		return n, nil
	}
	if k.Type == tea.KeyRunes && len(k.Runes) > 0 && !key.Matches(k, append(networkMoves, keyQuit, keyHelp)...) {
		// Typing starts the filter: "/" first, or any key that is not bound here. Fast typing
		// arrives as one read ("/dec", "stor").
		text := strings.TrimPrefix(string(k.Runes), "/")
		if k.Runes[0] == '/' {
			n.filter = ""
		}
		n.filtering, n.filter = true, n.filter+text
		return n.refilter(), nil
	}
	switch {
	case key.Matches(k, keyUp):
		n.cursor = clamp(n.cursor-1, len(n.shown))
	case key.Matches(k, keyDown):
		n.cursor = clamp(n.cursor+1, len(n.shown))
	case key.Matches(k, keyPgUp):
		n.cursor = clamp(n.cursor-10, len(n.shown))
	case key.Matches(k, keyPgDown):
		n.cursor = clamp(n.cursor+10, len(n.shown))
	case key.Matches(k, keyTop):
		n.cursor = 0
	case key.Matches(k, keyBottom):
		n.cursor = clamp(len(n.shown)-1, len(n.shown))
	case key.Matches(k, networkChoose):
		if cur := n.current(); cur != nil {
			if p := n.problem(cur.net); p != "" {
				n.confirming = p
				return n, nil
			}
			return n, nav(1)
		}
	case key.Matches(k, networkClear) && n.filter != "":
		n.filter = ""
		return n.refilter(), nil
	case key.Matches(k, keyBack):
		return n, nav(-1)
	}
	return n, nil
}

// problem is why a network should not be attached, as the commands refuse it without --force:
// no export in it, the machines' own network, or a finding of attach.Fitness that leaves a node
// without an address or a port. "" when there is none.
func (n networkModel) problem(nw openstack.Network) string {
	if n.disc == nil {
		return ""
	}
	if p := n.disc.NetworkProblem(nw.ID, n.nodeAddrs); p != "" {
		return p
	}
	if errs := attach.Errors(attach.Fitness(nw, n.fitness)); len(errs) > 0 {
		return errs[0].String()
	}
	return ""
}

// needsForce tells whether one of these networks is one the guard questions (the admin said
// yes to it): `machinesets patch` then needs --force to do the same.
func (n networkModel) needsForce(ids []string) bool {
	if n.disc == nil {
		return false
	}
	for _, id := range ids {
		for _, nw := range n.disc.Networks {
			if neutronid.Equal(nw.ID, id) && n.problem(nw) != "" {
				return true
			}
		}
		if !slices.ContainsFunc(n.disc.Networks, func(nw openstack.Network) bool { return neutronid.Equal(nw.ID, id) }) && n.disc.NetworkProblem(id, n.nodeAddrs) != "" {
			return true
		}
	}
	return false
}

func (n networkModel) keys(*session) []key.Binding {
	switch {
	case n.confirming != "":
		return []key.Binding{networkAnyway, networkAnother}
	case n.filtering:
		return []key.Binding{networkTyping, networkDone, networkClear}
	case n.filter != "":
		// esc clears the filter before it goes back.
		return []key.Binding{keyMove, networkFilter, networkChoose, networkClear}
	}
	return []key.Binding{keyMove, networkFilter, networkChoose, keyBack}
}

// grabs: while filtering, q and ? are typed into the filter.
func (n networkModel) grabs(*session) grab {
	if n.filtering {
		return grabTyping
	}
	return grabNone
}

// update takes what discovery found, and the network as Neutron describes it after the review
// changed its subnets.
func (n networkModel) update(s *session, msg tea.Msg, _ bool) (networkModel, tea.Cmd) {
	switch msg := msg.(type) {
	case discoveryMsg:
		errText := ""
		if msg.err != nil {
			errText = msg.err.Error()
		}
		n = n.withDiscovery(msg.d, errText)
		if s.conn != nil {
			n.nodeAddrs, n.fitness = s.conn.NodeAddresses, s.conn.Fitness
		}
	case fixedMsg:
		if msg.network != nil {
			n = n.withNetwork(*msg.network)
		}
	}
	return n, nil
}

// enter: the network screen fills itself as soon as discovery answers.
func (n networkModel) enter(*session) (networkModel, tea.Cmd) { return n, nil }

func (n networkModel) view(s *session) []string {
	w, h, spin := s.width, s.height, s.spin
	if n.loading {
		return []string{spin + " finding the network Manila exports on (networks, subnets, shares, export locations)…"}
	}
	var lines []string
	if n.err != "" {
		lines = append(lines, wrapStyled(styleErr, "✗ "+n.err, w)...)
		lines = append(lines, styleDim.Render("Press esc to go back and check the connection, or q to quit."))
		if len(n.rows) == 0 {
			return lines
		}
	}
	if n.none != "" {
		lines = append(lines, wrapStyled(styleWarn, "! "+n.none, w)...)
	}
	if n.confirming != "" {
		lines = append(lines, wrapStyled(styleErr, "✗ "+upperFirst(n.confirming)+".", w)...)
		lines = append(lines, wrapStyled(styleTitle, "Attach the workers to it anyway? y attaches, n (the default) chooses another.", w)...)
	}
	filter := styleDim.Render("type or / to filter")
	if n.filtering || n.filter != "" {
		filter = "filter: " + n.filter
		if n.filtering {
			filter += "█"
		}
	}
	lines = append(lines, fmt.Sprintf("%d of %d networks  %s", len(n.shown), len(n.rows), filter))

	details := n.details(w)
	side := w >= 100
	listH := max(h-len(lines), 3)
	listW := w
	if side {
		listW = w * 55 / 100
	} else {
		listH = max(h-len(lines)-len(details)-1, 3)
	}
	off := window(0, n.cursor, listH, len(n.shown))
	var list []string
	for i := off; i < len(n.shown) && i < off+listH; i++ {
		r := n.rows[n.shown[i]]
		var cidrs []string
		for _, p := range r.net.CIDRs() {
			cidrs = append(cidrs, p.String())
		}
		mark := " "
		if r.cand != nil && r.cand.HasEvidence() {
			mark = styleOK.Render("*")
		}
		name := r.net.Name
		if name == "" {
			name = r.net.ID
		}
		row := fmt.Sprintf("%s%s %-20s %s", pointer(i == n.cursor), mark, cut(name, 20), strings.Join(cidrs, ","))
		if i == n.cursor {
			row = pointer(true) + mark + " " + styleCursor.Render(fmt.Sprintf("%-20s", cut(name, 20))) + " " + strings.Join(cidrs, ",")
		}
		list = append(list, cut(row, listW))
	}
	if len(n.shown) == 0 {
		list = append(list, styleDim.Render("  no network matches the filter (esc clears it)"))
	}
	if side {
		return append(lines, columns(list, details, listW, w)...)
	}
	lines = append(lines, fit(list, w, listH)...)
	return append(append(lines, styleDim.Render(strings.Repeat("┄", w))), details...)
}

// details describes the network under the cursor: ID, subnets, why it is (or is not) the one.
func (n networkModel) details(w int) []string {
	r := n.current()
	if r == nil {
		return nil
	}
	if w >= 100 {
		w = w - w*55/100 - 2
	}
	nw := r.net
	lines := []string{styleTitle.Render(orNone(nw.Name)) + " " + styleDim.Render(nw.ID)}
	var subs []string
	for _, s := range nw.Subnets {
		subs = append(subs, fmt.Sprintf("%s %s", coalesceName(s.Name, s.ID), s.CIDR))
	}
	flags := ""
	if nw.Shared {
		flags += ", shared"
	}
	if nw.External {
		flags += ", external"
	}
	lines = append(lines, wrap("subnets: "+orNoneList(subs)+flags, w)...)
	switch {
	case r.cand != nil && len(r.cand.Exports) > 0:
		for _, reason := range r.cand.Reasons {
			lines = append(lines, wrapStyled(styleOK, "✓ "+reason, w)...)
		}
	case r.cand != nil:
		for _, reason := range r.cand.Reasons {
			lines = append(lines, wrap("• "+reason, w)...)
		}
		lines = append(lines, wrapStyled(styleWarn, "! no Manila export location lies in this network's subnets: pods reach shares through it only if Manila exports there later", w)...)
	default:
		lines = append(lines, wrapStyled(styleWarn, "! no Manila export location lies in this network's subnets: pods would not reach the shares through it", w)...)
	}
	// What the network would do to the nodes as their second NIC (attach.Fitness): the same
	// findings the commands print.
	for _, f := range attach.Fitness(nw, n.fitness) {
		text := strings.TrimPrefix(f.String(), "network "+f.Network+", ")
		if f.Severity == attach.SeverityError {
			lines = append(lines, wrapStyled(styleErr, "✗ "+text, w)...)
		} else {
			lines = append(lines, wrapStyled(styleWarn, "! "+text, w)...)
		}
	}
	return lines
}

func coalesceName(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func orNoneList(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// upperFirst makes a message a sentence: its first letter in upper case.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
