package wizard

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// fitnessModel is the review's account of what the chosen storage network does to the nodes:
// the warnings of attach.Fitness (a second default route, DNS announced, IPv6 without router
// advertisements). Nothing is applied before the user acknowledges them, and the subnets' part
// can be fixed from here, after the change is shown and confirmed.
type fitnessModel struct {
	network  openstack.Network
	warnings []attach.Finding
	// acked: the user acknowledged the warnings; nagged: enter was pressed before.
	acked  bool
	nagged bool
	// asking: the change of the subnets is shown and waits for an explicit yes; fixing: it is
	// being made.
	asking bool
	fixing bool
	// done says what the last change did, subnet by subnet, and what the network says since.
	done []screenLine
}

// newFitnessModel judges nw for the review; the acknowledgement of prev carries over when it
// covered every warning nw still has (the user went back and came again with the same network).
func newFitnessModel(nw *openstack.Network, prev fitnessModel) fitnessModel {
	if nw == nil {
		return fitnessModel{}
	}
	f := fitnessModel{network: *nw, warnings: warningsOf(*nw)}
	f.acked = prev.acked && prev.network.ID == nw.ID && covers(prev.warnings, f.warnings)
	return f
}

// warningsOf are the findings of nw that the commands print and attach anyway.
func warningsOf(nw openstack.Network) []attach.Finding {
	return slices.DeleteFunc(attach.Fitness(nw, attach.FitnessOptions{}), func(f attach.Finding) bool { return f.Severity != attach.SeverityWarning })
}

// covers tells whether every finding of now was among those of before.
func covers(before, now []attach.Finding) bool {
	for _, f := range now {
		if !slices.Contains(before, f) {
			return false
		}
	}
	return true
}

// blocks: the warnings are not acknowledged yet, so nothing may be applied.
func (f fitnessModel) blocks() bool { return len(f.warnings) > 0 && !f.acked }

// subnetFix is what the wizard can change of one subnet, with the findings it removes.
type subnetFix struct {
	subnet   openstack.Subnet
	update   openstack.SubnetUpdate
	findings []attach.Finding
}

// fixes are the changes that remove the warnings of the subnets, and the warnings no change of
// a subnet removes (an IPv6 subnet's mode is fixed when it is made).
func (f fitnessModel) fixes() (fixes []subnetFix, rest []attach.Finding) {
	for _, s := range f.network.Subnets {
		fix := subnetFix{subnet: s, update: openstack.SubnetUpdate{SubnetID: s.ID}}
		for _, w := range f.warnings {
			if !strings.Contains(w.Subnet, s.ID) {
				continue
			}
			switch w.ID {
			case attach.FindingDefaultRoute:
				fix.update.NoGateway = s.Gateway.IsValid()
				fix.update.DropDefaultRoutes = slices.ContainsFunc(s.HostRoutes, func(r openstack.Route) bool { return r.Destination.Bits() == 0 })
			case attach.FindingDNSAnnounced:
				fix.update.NoDNS = true
			default:
				rest = append(rest, w)
				continue
			}
			if !slices.Contains(fix.findings, w) {
				fix.findings = append(fix.findings, w)
			}
		}
		if !fix.update.Empty() {
			fixes = append(fixes, fix)
		}
	}
	return fixes, rest
}

// fixable: some warning goes away with a change of a subnet.
func (f fitnessModel) fixable() bool {
	fixes, _ := f.fixes()
	return len(fixes) > 0
}

// fixedMsg is what the change of the subnets did, and the network read again afterwards.
type fixedMsg struct {
	networkID string
	results   []fixResult
	network   *openstack.Network
	readErr   error
}

type fixResult struct {
	fix subnetFix
	err error
}

// fixCmd changes the subnets, one after the other (a refusal of one does not keep the others
// from being tried), then reads the network again to judge it anew.
func fixCmd(ctx context.Context, b Backend, networkID string, fixes []subnetFix) tea.Cmd {
	return func() tea.Msg {
		msg := fixedMsg{networkID: networkID}
		for _, fx := range fixes {
			msg.results = append(msg.results, fixResult{fix: fx, err: b.UpdateSubnet(ctx, fx.update)})
		}
		nw, err := b.Network(ctx, networkID)
		if err != nil {
			msg.readErr = err
		} else {
			msg.network = &nw
		}
		return msg
	}
}

// The keys of the network's warnings on the review.
var (
	fitAck     = bind("a", "acknowledge the warnings", "a")
	fitChange  = bind("c", "change the subnet", "c")
	fitYes     = bind("y", "change the subnets", keyYes.Keys()...)
	fitNo      = told("n or enter", "keep them")
	fitAnyBack = told("any key", "back")
)

// key handles the keys of the warnings: a acknowledges them, c shows the change of the subnets,
// y at that question makes it. handled is false for the keys of the review itself.
func (f fitnessModel) key(k tea.KeyMsg, ctx context.Context, b Backend, dryRun bool) (fitnessModel, tea.Cmd, bool) {
	switch {
	case f.fixing:
		return f, nil, true // the change is under way; its answer comes back as fixedMsg
	case f.asking:
		// Only an explicit yes changes the cloud; anything else is the default, no.
		f.asking = false
		if key.Matches(k, fitYes) && !dryRun {
			fixes, _ := f.fixes()
			f.fixing, f.done = true, nil
			return f, fixCmd(ctx, b, f.network.ID, fixes), true
		}
		return f, nil, true
	case key.Matches(k, fitAck) && len(f.warnings) > 0:
		f.acked, f.nagged = !f.acked, false
		return f, nil, true
	case key.Matches(k, fitChange) && f.fixable():
		f.asking = true
		return f, nil, true
	}
	return f, nil, false
}

// keys are those of the question about the subnets while it is asked; nil otherwise.
func (f fitnessModel) keys(dryRun bool) []key.Binding {
	switch {
	case f.asking && dryRun:
		return []key.Binding{fitAnyBack}
	case f.asking:
		return []key.Binding{fitYes, fitNo}
	}
	return nil
}

// withFixed takes the answer of fixCmd: what each subnet change did, then the network as it is
// now, judged again. The acknowledgement stays when no new warning appeared.
func (f fitnessModel) withFixed(msg fixedMsg) fitnessModel {
	if msg.networkID != f.network.ID {
		return f
	}
	f.fixing, f.done = false, nil
	refused := false
	for _, r := range msg.results {
		switch {
		case r.err == nil:
			f.done = append(f.done, screenLine{Text: "✓ subnet " + r.fix.subnet.Ref() + " changed: " + changeText(r.fix.update), Tone: toneGood})
		case openstack.KindOf(r.err) == openstack.KindForbidden:
			refused = true
			f.done = append(f.done, screenLine{Text: "✗ Your role does not allow this change: " + strings.TrimSuffix(r.err.Error(), ".") + ".", Tone: toneBad},
				screenLine{Text: "The cloud's administrator can make the change:"})
			for _, w := range r.fix.findings {
				f.done = append(f.done, screenLine{Text: "  " + adminCommand(w.Fix, r.fix.subnet)})
			}
		default:
			f.done = append(f.done, screenLine{Text: "✗ subnet " + r.fix.subnet.Ref() + " was not changed: " + r.err.Error(), Tone: toneBad})
		}
	}
	switch {
	case msg.network != nil:
		was := f.warnings
		f.network, f.warnings = *msg.network, warningsOf(*msg.network)
		f.acked = f.acked && covers(was, f.warnings)
		if len(f.warnings) == 0 {
			f.acked, f.nagged = false, false
			f.done = append(f.done, screenLine{Text: "✓ network " + f.network.Ref() + ", read again from Neutron, hands the nodes no default route and no DNS server: nothing left to acknowledge.", Tone: toneGood})
		}
	case msg.readErr != nil:
		f.done = append(f.done, screenLine{Text: "✗ reading network " + f.network.Ref() + " again: " + msg.readErr.Error() + "; the warnings below are those read before the change.", Tone: toneBad})
	}
	if refused && len(f.warnings) > 0 {
		f.done = append(f.done, screenLine{Text: "You can still acknowledge the warnings (a) and go on; the nodes then get them as they are.", Tone: toneDim})
	}
	return f
}

// changeText says what an update sets, in Neutron's terms.
func changeText(u openstack.SubnetUpdate) string {
	var parts []string
	if u.NoGateway {
		parts = append(parts, "gateway_ip null")
	}
	if u.DropDefaultRoutes {
		parts = append(parts, "host_routes without the default ones")
	}
	if u.NoDNS {
		parts = append(parts, `dns_nameservers ["0.0.0.0"]`)
	}
	return strings.Join(parts, ", ")
}

// adminCommand is a finding's fix as the cloud's administrator runs it: by the subnet's ID,
// since an administrator sees the subnets of every project and names repeat across them.
func adminCommand(fix string, s openstack.Subnet) string {
	if s.Name != "" && strings.HasSuffix(fix, " "+s.Name) {
		return strings.TrimSuffix(fix, s.Name) + s.ID
	}
	return fix
}

// lines are the warnings with their fixes, what the last change did, and whether the user
// acknowledged them: the head of the review. None when the network is fit and nothing was
// changed.
func (f fitnessModel) lines(w int) []string {
	// What the last change did comes first: it is what the user waits for.
	var lines []string
	for _, l := range f.done {
		lines = append(lines, toned(l, w)...)
	}
	if len(f.warnings) > 0 {
		if len(lines) > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, wrapStyled(styleTitle, "What network "+f.network.Ref()+" does to the nodes attached to it:", w)...)
		for _, fd := range f.warnings {
			text := fd.Message
			if fd.Subnet != "" {
				text = "subnet " + fd.Subnet + ": " + text
			}
			lines = append(lines, wrapStyled(styleWarn, "! "+text, w)...)
			if fd.Fix != "" {
				lines = append(lines, wrap("    fix: "+fd.Fix, w)...)
			}
		}
	}
	if len(f.warnings) > 0 {
		lines = append(lines, f.ackLine(w)...)
	}
	if len(lines) > 0 {
		lines = append(lines, "")
	}
	return lines
}

// ackLine says whether the warnings are acknowledged, and how.
func (f fitnessModel) ackLine(w int) []string {
	what := "warning"
	if n := len(f.warnings); n > 1 {
		what = fmt.Sprintf("%d warnings", n)
	}
	if f.acked {
		return wrapStyled(styleOK, "[x] acknowledged: the nodes are attached with the "+what+" above (a takes it back)", w)
	}
	how := "a acknowledges"
	if f.fixable() {
		how += ", c changes the subnet from here"
	}
	return wrapStyled(styleWarn, "[ ] the "+what+" above not acknowledged yet: "+how, w)
}

// status is the line under the review while warnings are open: always in sight, whatever the
// scroll.
func (f fitnessModel) status(spin string) string {
	switch {
	case f.fixing:
		return spin + " changing the subnets in Neutron, then reading network " + f.network.Ref() + " again…"
	case len(f.warnings) == 0:
		return ""
	case f.acked:
		return styleOK.Render("✓ " + warnings(len(f.warnings)) + " of the storage network acknowledged")
	case f.nagged:
		return styleErr.Render("✗ nothing is applied before the warnings are acknowledged: press a")
	}
	return styleWarn.Render("! " + warnings(len(f.warnings)) + " to acknowledge (a) before applying")
}

func warnings(n int) string {
	if n == 1 {
		return "1 warning"
	}
	return fmt.Sprintf("%d warnings", n)
}

// question shows exactly what changes, on which subnet, then asks; at a height h too small for
// all of it, the question itself stays in sight.
func (f fitnessModel) question(w, h int, dryRun bool) []string {
	body, ask := f.change(w, dryRun)
	if len(body)+len(ask) > h {
		body = body[:max(h-len(ask), 0)]
	}
	return append(body, ask...)
}

// change is what the question shows, and the question.
func (f fitnessModel) change(w int, dryRun bool) (body, ask []string) {
	fixes, rest := f.fixes()
	lines := wrapStyled(styleTitle, "Change the subnets of network "+f.network.Ref()+" in Neutron:", w)
	for _, fx := range fixes {
		lines = append(lines, "", "subnet "+fx.subnet.Ref()+":")
		for _, fd := range fx.findings {
			lines = append(lines, wrap("  "+fd.Fix, w)...)
		}
		lines = append(lines, wrapStyled(styleDim, "  (sets "+changeText(fx.update)+")", w)...)
	}
	for _, fd := range rest {
		lines = append(lines, "")
		lines = append(lines, wrap("! not changed here: subnet "+fd.Subnet+": "+fd.Fix, w)...)
	}
	lines = append(lines, "")
	lines = append(lines, wrap("Every port on these subnets gets the change at its next DHCP renewal, not only the workers: other machines on them lose the default route through the subnet and the DNS server it announced.", w)...)
	if dryRun {
		return lines, wrapStyled(styleWarn, "Dry run: the change is shown, not made. Any key goes back.", w)
	}
	return lines, wrapStyled(styleTitle, "Change the subnets now? y changes them, n (the default) goes back.", w)
}

// withNetwork puts the network read again in place of the one the screen had, in the list, its
// candidate and the discovery, keeping the cursor where it is.
func (n networkModel) withNetwork(nw openstack.Network) networkModel {
	for i := range n.rows {
		if n.rows[i].net.ID != nw.ID {
			continue
		}
		n.rows[i].net = nw
		if c := n.rows[i].cand; c != nil {
			cand := *c
			cand.Network = nw
			n.rows[i].cand = &cand
		}
	}
	if n.disc != nil {
		d := *n.disc
		d.Networks = slices.Clone(d.Networks)
		for i := range d.Networks {
			if d.Networks[i].ID == nw.ID {
				d.Networks[i] = nw
			}
		}
		d.Candidates = slices.Clone(d.Candidates)
		for i := range d.Candidates {
			if d.Candidates[i].Network.ID == nw.ID {
				d.Candidates[i].Network = nw
			}
		}
		n.disc = &d
	}
	return n
}

// acknowledged is the closing words' record of the warnings the user attached the network
// with.
func acknowledged(f fitnessModel) string {
	ids := map[string]bool{}
	var list []string
	for _, w := range f.warnings {
		if !ids[w.ID] {
			ids[w.ID] = true
			list = append(list, w.ID)
		}
	}
	return "The storage network's warnings (" + strings.Join(list, ", ") + ") were acknowledged: `manila-setup networks discover` shows them with their fixes."
}
