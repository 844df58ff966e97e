package wizard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/workers"
)

// Options configure the wizard.
type Options struct {
	Backend Backend
	// DryRun walks every screen but writes nothing: the review's diffs are shown, nothing is
	// patched or rolled and no test volume is created.
	DryRun bool
	// Context bounds every call of the Backend; nil means context.Background().
	Context context.Context
	// Now is the clock of the elapsed times; nil means time.Now.
	Now func() time.Time
	// StoragePoll is how often the verify screen reads the driver's state; zero: 2s.
	StoragePoll time.Duration
	// NodePoolPoll is how often the apply screen reads the progress of the patched NodePools
	// and MachineDeployments (which their controllers roll, not the wizard); zero: 5s.
	NodePoolPoll time.Duration
}

// The screens, in order.
type stepID int

const (
	stepConnect stepID = iota
	stepNetwork
	stepGroups
	stepSets
	stepReview
	stepApply
	stepVerify
	stepCount
)

var stepTitles = [stepCount]string{"Connect", "Storage network", "Security groups", "MachineSets", "Review", "Apply and roll", "Verify"}

// Outcome is how the wizard ended, for the command's exit code and closing words.
type Outcome struct {
	// Applied: MachineSets were patched (and rolled, unless RolloutErr says otherwise).
	Applied bool
	// Interrupted: the user stopped the rollout; running the wizard or `machinesets rollout`
	// again resumes it.
	Interrupted bool
	Err         error
	// Summary is what to print once the screen is gone.
	Summary string
}

// Model is the wizard: the shared state of the screens plus one sub-model per screen.
type Model struct {
	opts   Options
	ctx    context.Context
	width  int
	height int
	step   stepID
	help   bool
	spin   spinner.Model

	// Shared results, loaded in the background as soon as the cloud is connected.
	conn      *Connection
	discovery *openstack.Discovery
	discErr   string
	groups    []openstack.SecurityGroup
	groupsErr string

	connect connectModel
	network networkModel
	sgs     groupsModel
	sets    setsModel
	review  reviewModel
	apply   applyModel
	verify  verifyModel

	// changed are the subnets the wizard changed in Neutron (on the user's yes at the review),
	// with what it set: the closing words say so, whatever else happened.
	changed []string

	outcome Outcome
	quit    bool
}

// New returns the wizard for opts.
func New(opts Options) Model {
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.StoragePoll == 0 {
		opts.StoragePoll = 2 * time.Second
	}
	if opts.NodePoolPoll == 0 {
		opts.NodePoolPoll = 5 * time.Second
	}
	sp := spinner.New(spinner.WithSpinner(spinner.Line))
	return Model{opts: opts, ctx: opts.Context, width: 80, height: 24, spin: sp,
		connect: newConnectModel(), network: networkModel{loading: true}, sgs: groupsModel{loading: true}}
}

// Outcome reports how the wizard ended.
func (m Model) Outcome() Outcome { return m.outcome }

// Init loads the connect screen's choices; nothing blocks the first frame.
func (m Model) Init() tea.Cmd {
	return tea.Batch(m.spin.Tick, loadTargets(m.opts.Backend))
}

// Messages: every result of the Backend comes back as one of these.
type (
	targetsMsg   struct{ t Targets }
	connectedMsg struct {
		seq  int
		conn Connection
		err  error
	}
	discoveryMsg struct {
		d   *openstack.Discovery
		err error
	}
	groupsMsg struct {
		groups []openstack.SecurityGroup
		err    error
	}
	setsMsg struct {
		key   string
		offer workers.Offer
		inv   *workers.Inventory
		err   error
	}
	// planMsg and patchedMsg are a patch's rows, one per object, in the order of the sections.
	planMsg struct {
		key     string
		results []attach.Result
		err     error
		// risk, of a detach: the pods on Manila volumes whose nodes it replaces, and the nodes
		// that could not be read.
		risk workers.RemovalRisk
	}
	patchedMsg struct {
		results []attach.Result
		err     error
	}
	// followMsg is a read of the rows that roll by themselves, for their progress: the rows
	// read, and by section ID why a section could not be; followPollMsg asks for the next.
	followMsg struct {
		rows []workers.Row
		errs map[string]string
	}
	followPollMsg     struct{}
	rolloutStartedMsg struct {
		events <-chan tea.Msg
		cancel context.CancelFunc
	}
	progressMsg struct {
		p      rollout.SetProgress
		events <-chan tea.Msg
	}
	rolloutDoneMsg struct {
		results []rollout.SetProgress
		err     error
	}
	clockMsg   time.Time
	storageMsg struct {
		s   StorageStatus
		err error
	}
	storagePollMsg struct{}
	rwxStartedMsg  struct {
		events <-chan tea.Msg
		cancel context.CancelFunc
	}
	rwxLineMsg struct {
		line   string
		events <-chan tea.Msg
	}
	rwxDoneMsg struct{ r RWXResult }
	// navMsg moves to the next (+1) or previous (-1) screen.
	navMsg int
)

func loadTargets(b Backend) tea.Cmd {
	return func() tea.Msg { return targetsMsg{b.Targets()} }
}

func connectCmd(ctx context.Context, b Backend, seq int, cloud, kctx string) tea.Cmd {
	return func() tea.Msg {
		conn, err := b.Connect(ctx, cloud, kctx)
		return connectedMsg{seq: seq, conn: conn, err: err}
	}
}

func discoverCmd(ctx context.Context, b Backend) tea.Cmd {
	return func() tea.Msg {
		d, err := b.Discover(ctx)
		return discoveryMsg{d, err}
	}
}

func groupsCmd(ctx context.Context, b Backend) tea.Cmd {
	return func() tea.Msg {
		g, err := b.SecurityGroups(ctx)
		return groupsMsg{g, err}
	}
}

// setsCmd reads what the cluster has: its MachineSets, its Cluster API MachineSets and
// MachineDeployments, and its NodePools on a management cluster; a kind the cluster does not
// serve is not asked for.
func setsCmd(ctx context.Context, b Backend, key string, want attach.Attachment, kinds workers.Kinds) tea.Cmd {
	return func() tea.Msg {
		inv, err := b.Inventory(ctx, want, kinds)
		msg := setsMsg{key: key, inv: inv, err: err}
		if inv != nil {
			msg.offer = inv.Offer(kinds)
		}
		return msg
	}
}

// planCmd computes the diffs of the chosen MachineSets, Cluster API objects and NodePools;
// nothing is written.
func planCmd(ctx context.Context, b Backend, key string, a attach.Attachment, sel workers.Selection) tea.Cmd {
	return func() tea.Msg {
		results, err := b.Patch(ctx, a, sel, true)
		return planMsg{key: key, results: results, err: err}
	}
}

// detachPlanCmd computes the removal's diffs and finds the pods on Manila volumes that its
// rollout would take the storage network from; nothing is written.
func detachPlanCmd(ctx context.Context, b Backend, key string, sel workers.Selection) tea.Cmd {
	return func() tea.Msg {
		results, err := b.Remove(ctx, sel, true)
		msg := planMsg{key: key, results: results, err: err}
		if err == nil {
			msg.risk, msg.err = b.RemovalRisk(ctx, sel, results)
		}
		return msg
	}
}

func nav(d int) tea.Cmd { return func() tea.Msg { return navMsg(d) } }

// Update turns one message into the next state. It does no I/O.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		return m, nil
	case spinner.TickMsg:
		var cmd tea.Cmd
		m.spin, cmd = m.spin.Update(msg)
		return m, cmd
	case tea.KeyMsg:
		return m.key(msg)
	case navMsg:
		return m.navigate(int(msg))

	case targetsMsg:
		var cmd tea.Cmd
		m.connect, cmd = m.connect.withTargets(msg.t, m.ctx, m.opts.Backend)
		return m, cmd
	case connectedMsg:
		if msg.seq != m.connect.seq {
			return m, nil // an answer for a choice that has changed since
		}
		m.connect = m.connect.withResult(msg.conn, msg.err)
		if msg.err != nil {
			return m, nil
		}
		conn := msg.conn
		m.conn = &conn
		m.discovery, m.discErr, m.groups, m.groupsErr = nil, "", nil, ""
		m.network = networkModel{loading: true}
		m.sgs = groupsModel{loading: true}
		// Everything the next screens need starts loading now, while the user reads.
		return m, tea.Batch(discoverCmd(m.ctx, m.opts.Backend), groupsCmd(m.ctx, m.opts.Backend))
	case discoveryMsg:
		if msg.err != nil {
			m.discErr = msg.err.Error()
		}
		m.discovery = msg.d
		m.network = m.network.withDiscovery(msg.d, m.discErr)
		if m.conn != nil {
			m.network.nodeAddrs, m.network.fitness = m.conn.NodeAddresses, m.conn.Fitness
		}
		return m, nil
	case groupsMsg:
		if msg.err != nil {
			m.groupsErr = msg.err.Error()
		}
		m.groups = msg.groups
		if m.step == stepGroups {
			m.sgs = newGroupsModel(m.groups, m.groupsErr, m.network.chosenCandidate(), m.sgs.selected)
		}
		return m, nil
	case setsMsg:
		m.sets = m.sets.withSets(msg)
		return m, nil
	case planMsg:
		m.review = m.review.withPlan(msg)
		return m, nil
	case fixedMsg:
		m.review.fit, m.review.scroll = m.review.fit.withFixed(msg), 0 // to the outcome, at the top
		for _, r := range msg.results {
			if r.err == nil {
				m.changed = append(m.changed, "subnet "+r.fix.subnet.Ref()+" ("+changeText(r.fix.update)+")")
			}
		}
		if msg.network != nil {
			// The network as Neutron now describes it, on the network screen too.
			m.network = m.network.withNetwork(*msg.network)
			m.discovery = m.network.disc
		}
		return m, nil
	case patchedMsg, rolloutStartedMsg, progressMsg, rolloutDoneMsg, clockMsg, followMsg, followPollMsg:
		var cmd tea.Cmd
		m.apply, cmd = m.apply.update(msg, m.ctx, m.opts, m.step == stepApply)
		if o := m.apply.outcome(); o.Summary != "" {
			m.outcome = o
			if o.Applied && len(m.review.fit.warnings) > 0 {
				m.outcome.Summary += " " + acknowledged(m.review.fit)
			}
			if len(m.changed) > 0 {
				m.outcome.Summary += " " + m.changedNote()
			}
		}
		return m, cmd
	case storageMsg, storagePollMsg, rwxStartedMsg, rwxLineMsg, rwxDoneMsg:
		var cmd tea.Cmd
		m.verify, cmd = m.verify.update(msg, m.step == stepVerify, m.ctx, m.opts)
		return m, cmd
	}
	return m, nil
}

// key handles the keys every screen shares, then hands the others to the current screen.
func (m Model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	s := k.String()
	if m.help {
		m.help = false // any key closes the help
		if s == "ctrl+c" {
			return m.key(k)
		}
		return m, nil
	}
	// While machines are being replaced, stopping is asked first.
	if m.step == stepApply && m.apply.running() && !(s == "?" && !m.apply.confirmStop) {
		var cmd tea.Cmd
		m.apply, cmd = m.apply.key(s)
		return m, cmd
	}
	// A running multi-writer check is stopped and cleaned up before quitting.
	if m.step == stepVerify && m.verify.running {
		var cmd tea.Cmd
		m.verify, cmd = m.verify.key(s, m.ctx, m.opts)
		if m.verify.quitting {
			m.outcome.Summary = coalesceName(m.outcome.Summary, m.quitSummary())
		}
		return m, cmd
	}
	typing := m.step == stepNetwork && m.network.filtering
	if m.step == stepVerify && s == "enter" {
		s = "q" // finishing is quitting
	}
	switch {
	case s == "ctrl+c", s == "q" && !typing:
		m.quit = true
		if m.outcome.Summary == "" {
			m.outcome.Summary = m.quitSummary()
		}
		return m, tea.Quit
	case s == "?" && !typing:
		m.help = true // the screen's work goes on underneath
		return m, nil
	}
	var cmd tea.Cmd
	switch m.step {
	case stepConnect:
		m.connect, cmd = m.connect.key(s, m.ctx, m.opts.Backend)
	case stepNetwork:
		m.network, cmd = m.network.key(k)
	case stepGroups:
		m.sgs, cmd = m.sgs.key(s)
	case stepSets:
		m.sets, cmd = m.sets.key(s)
	case stepReview:
		m.review, cmd = m.review.key(s, max(m.width, 20), m.bodyHeight(), m.opts.DryRun, m.ctx, m.opts.Backend)
	case stepApply:
		m.apply, cmd = m.apply.key(s)
	case stepVerify:
		m.verify, cmd = m.verify.key(s, m.ctx, m.opts)
	}
	return m, cmd
}

// navigate leaves the current screen forwards or backwards, handing its choice on.
func (m Model) navigate(d int) (tea.Model, tea.Cmd) {
	if d < 0 {
		switch {
		case m.step == stepConnect, m.step >= stepApply:
			return m, nil // after applying there is no going back
		}
		m.step--
		return m, nil
	}
	b := m.opts.Backend
	switch m.step {
	case stepConnect:
		m.step = stepNetwork
	case stepNetwork:
		if m.groups != nil || m.groupsErr != "" {
			m.sgs = newGroupsModel(m.groups, m.groupsErr, m.network.chosenCandidate(), m.sgs.selected)
		} else {
			m.sgs = groupsModel{loading: true, selected: m.sgs.selected}
		}
		m.step = stepGroups
	case stepGroups:
		want := m.attachment()
		key := attachmentKey(want)
		m.step = stepSets
		if m.sets.forKey == key && !m.sets.loading && m.sets.err == "" {
			return m, nil // same choice as before: keep the user's selection
		}
		conn := Connection{Served: workers.Served{MachineAPI: true}}
		if m.conn != nil {
			conn = *m.conn
		}
		kinds := conn.Kinds()
		m.sets = setsModel{loading: true, forKey: key, reading: workers.Reading(kinds)}
		return m, setsCmd(m.ctx, b, key, want, kinds)
	case stepSets:
		if rows := m.sets.detaching(); rows != nil {
			return m.reviewDetach(rows)
		}
		chosen := m.sets.chosen()
		want := m.attachment()
		key := attachmentKey(want)
		for _, r := range chosen {
			key += "|" + rowID(r)
		}
		sel := workers.Select(chosen)
		m.review = reviewModel{loading: true, forKey: key, kinds: m.sets.offer.Choose, commands: commandLines(m.conn, want, sel, m.network.needsForce(want.Networks)),
			fit: newFitnessModel(m.network.chosen(), m.review.fit)}
		m.step = stepReview
		return m, planCmd(m.ctx, b, key, want, sel)
	case stepReview:
		m.step = stepApply
		var cmd tea.Cmd
		if m.review.detach {
			m.apply, cmd = startDetach(m.ctx, b, m.sets.detaching(), m.review.forced, m.opts.DryRun, m.opts.Now())
			return m, cmd
		}
		m.apply, cmd = startApply(m.ctx, b, m.attachment(), m.sets.chosen(), m.opts.DryRun, m.opts.Now())
		return m, cmd
	case stepApply:
		m.step = stepVerify
		m.verify = newVerifyModel(m.opts.DryRun, m.apply.chosen)
		if !m.verify.checksDriver {
			return m, nil // the driver of a hosted cluster is not on this cluster: nothing to read here
		}
		return m, storageCmd(m.ctx, b)
	}
	return m, nil
}

// reviewDetach shows what detaching rows takes off them: the same review as attaching, of the
// removal, with the commands that do the same.
func (m Model) reviewDetach(rows []workers.Row) (tea.Model, tea.Cmd) {
	key := "detach|" + rowID(rows[0])
	sel := workers.Select(rows)
	m.review = reviewModel{loading: true, forKey: key, kinds: "MachineSet", detach: true,
		commands: detachCommandLines(m.conn, rows, false), forcedCommands: detachCommandLines(m.conn, rows, true)}
	m.step = stepReview
	return m, detachPlanCmd(m.ctx, m.opts.Backend, key, sel)
}

// attachment is what the screens so far chose.
func (m Model) attachment() attach.Attachment {
	a := attach.Attachment{}
	if n := m.network.chosen(); n != nil {
		a.Networks = []string{n.ID}
	}
	a.SecurityGroups = m.sgs.chosen()
	return a
}

func attachmentKey(a attach.Attachment) string {
	return strings.Join(a.Networks, ",") + "|" + strings.Join(a.SecurityGroups, ",")
}

// changedNote says which subnets the wizard changed in Neutron.
func (m Model) changedNote() string {
	return "Changed in Neutron: " + strings.Join(m.changed, "; ") + "."
}

func (m Model) quitSummary() string {
	switch {
	case m.step < stepApply && len(m.changed) > 0:
		return "The cluster was not changed. " + m.changedNote()
	case m.step < stepApply:
		return "Nothing was changed."
	case m.opts.DryRun:
		return "Dry run: nothing was changed."
	}
	return ""
}

// bodyHeight is what is left for the screen under the title and its rule and over the rule
// and the key lines (one, or more at narrow widths).
func (m Model) bodyHeight() int {
	return max(max(m.height, 6)-3-len(hintLines(m.hints(), max(m.width, 20))), 2)
}

// View draws the current screen: a title line, the screen, and a line of keys.
func (m Model) View() string {
	if m.quit {
		return ""
	}
	w := max(m.width, 20)
	title := fmt.Sprintf("manila-setup networks attach · %d/%d %s", int(m.step)+1, stepCount, m.stepTitle(m.step))
	if m.opts.DryRun {
		title += " · dry run"
	}
	var body []string
	hints := m.hints()
	if m.help {
		body = helpView(m.stepTitle(m.step), m.helpText(m.step), hints, w)
	} else {
		body = m.body(w, m.bodyHeight())
	}
	var b strings.Builder
	lines := append([]string{styleTitle.Render(cut(title, w)), styleDim.Render(strings.Repeat("─", w))}, fit(body, w, m.bodyHeight())...)
	lines = append(lines, styleDim.Render(strings.Repeat("─", w)))
	lines = append(lines, hintLines(hints, w)...)
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}

func (m Model) body(w, h int) []string {
	switch m.step {
	case stepConnect:
		return m.connect.view(w, h, m.spin.View())
	case stepNetwork:
		return m.network.view(w, h, m.spin.View())
	case stepGroups:
		return m.sgs.view(w, h, m.spin.View())
	case stepSets:
		return m.sets.view(w, h, m.spin.View())
	case stepReview:
		return m.review.view(w, h, m.spin.View(), m.opts.DryRun)
	case stepApply:
		return m.apply.view(w, h, m.spin.View())
	case stepVerify:
		return m.verify.view(w, h, m.spin.View())
	}
	return nil
}

// hint is one key and what it does.
type hint struct{ key, what string }

func (m Model) hints() []hint {
	var hs []hint
	switch m.step {
	case stepConnect:
		hs = m.connect.hints()
	case stepNetwork:
		hs = m.network.hints()
		if m.network.filtering {
			return append(hs, hint{"ctrl+c", "quit"}) // q and ? are typed into the filter
		}
	case stepGroups:
		hs = m.sgs.hints()
	case stepSets:
		hs = m.sets.hints()
	case stepReview:
		hs = m.review.hints(m.opts.DryRun)
	case stepApply:
		hs = m.apply.hints()
	case stepVerify:
		hs = m.verify.hints()
	}
	if m.step > stepConnect && m.step < stepApply {
		hs = append(hs, hint{"esc", "back"})
	}
	return append(hs, hint{"?", "help"}, hint{"q", "quit"})
}

// hintLines are the keys of a screen in lines of width w, broken between keys, never inside
// one, so that no key is cut off at 80 or 60 columns.
func hintLines(hs []hint, w int) []string {
	var lines []string
	cur := ""
	for _, h := range hs {
		part := styleKey.Render(h.key) + " " + h.what
		switch {
		case cur == "":
			cur = part
		case ansi.StringWidth(cur)+2+ansi.StringWidth(part) <= w:
			cur += "  " + part
		default:
			lines = append(lines, cur)
			cur = part
		}
	}
	return append(lines, cut(cur, w))
}

// helpText says what each screen is for.
var helpText = [stepCount]string{
	"Choose the cloud (an entry of clouds.yaml) and the cluster (a context of the kubeconfig). Both are checked in the background: the cloud by authenticating, the cluster by listing its MachineSets (and, on a HyperShift management cluster, its NodePools). Nothing is changed.",
	"Choose the network Manila exports its shares on. The one discovery found is preselected, with the reason. A network without any export location will not let pods reach the shares.",
	"Choose the security groups the new ports get. Groups whose egress rules let NFS reach the export address are suggested first. None is required if the workers' groups already allow it.",
	"Choose the MachineSets whose machines get a port on the storage network. Workers are preselected; control-plane MachineSets are never touched. On a MachineSet manila-setup attached (its record, annotation " + attach.Annotation + "), d detaches it instead: the review shows the removal, enter takes off what the record names and replaces the machines, refused while pods on them use Manila volumes unless forced.",
	"The exact change of each MachineSet's providerSpec, and the commands that do the same without this wizard. Nothing has been written yet.",
	"The MachineSets are patched, then their machines are replaced one at a time without losing capacity. Stopping is safe: running the wizard or `manila-setup machinesets rollout` again resumes.",
	"The operator's ClusterCSIDriver conditions and the Manila StorageClasses. The multi-writer check mounts one ReadWriteMany volume on two nodes and shows what both wrote, then deletes everything it created.",
}

// stepTitle names a screen; the fourth after what the cluster has to choose from.
func (m Model) stepTitle(step stepID) string {
	if step != stepSets || m.conn == nil {
		return stepTitles[step]
	}
	return coalesceName(workers.Title(m.conn.Offered()), stepTitles[step])
}

// helpScreens are the screens whose help says what each kind offered changes there.
var helpScreens = map[stepID]workers.Screen{stepSets: workers.ScreenSets, stepReview: workers.ScreenReview, stepApply: workers.ScreenApply}

// helpText is what a screen is for, with what the kinds the cluster offers change there.
func (m Model) helpText(step stepID) string {
	text := helpText[step]
	if step == stepReview && len(m.review.fit.warnings) > 0 {
		text += " " + reviewWarningsHelp
	}
	if m.conn == nil {
		return text
	}
	if s, ok := helpScreens[step]; ok {
		text += workers.Help(m.conn.Offered(), s)
	}
	return text
}

func helpView(title, text string, hs []hint, w int) []string {
	lines := []string{styleTitle.Render("Help: " + title), ""}
	lines = append(lines, wrap(text, w-2)...)
	lines = append(lines, "", styleTitle.Render("Keys"))
	for _, h := range hs {
		lines = append(lines, fmt.Sprintf("  %-12s %s", h.key, h.what))
	}
	lines = append(lines, fmt.Sprintf("  %-12s %s", "ctrl+c", "quit (asks first while machines are replaced)"), "", styleDim.Render("Any key closes this help."))
	return lines
}
