package wizard

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
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

// Model is the wizard: the shared state of the screens plus one screen per step, spoken to
// only through the screen interface.
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
	groups    []openstack.SecurityGroup
	groupsErr string

	screens screens

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
	return Model{opts: opts, ctx: opts.Context, width: 80, height: 24, spin: sp, screens: screens{
		connect: newConnectModel(), network: newNetworkModel(), sgs: waitingGroups(nil),
		verify: newVerifyModel(opts.DryRun, nil)}}
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
	// quitMsg ends the wizard, as q does.
	quitMsg struct{}
)

// quit is what a screen returns to end the wizard.
func quit() tea.Msg { return quitMsg{} }

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
		report, err := b.Apply(ctx, attachRequest(a, sel, true))
		msg := planMsg{key: key, err: err}
		if report != nil {
			msg.results = report.Results
			// The review refuses what the patch would: the words of the command without --force.
			if len(report.Refused) > 0 && err == nil {
				msg.err = report.Refused[0]
			}
		}
		return msg
	}
}

// detachPlanCmd computes the removal's diffs and finds the pods on Manila volumes that its
// rollout would take the storage network from; nothing is written.
func detachPlanCmd(ctx context.Context, b Backend, key string, sel workers.Selection) tea.Cmd {
	return func() tea.Msg {
		report, err := b.Apply(ctx, detachRequest(sel, false, true))
		msg := planMsg{key: key, err: err}
		if report != nil {
			msg.results = report.Results
			if report.Risk != nil {
				msg.risk = *report.Risk
			}
		}
		return msg
	}
}

// attachRequest is the wizard's attachment: of the networks the user chose, the MachineSets
// rolled in a step of their own.
func attachRequest(a attach.Attachment, sel workers.Selection, dryRun bool) workers.Request {
	return workers.Request{Selection: sel, Attachment: a, Chosen: true, DryRun: dryRun, Rollout: &workers.Rollout{Later: true}}
}

// detachRequest is the wizard's removal of what the records name, refused while pods use
// Manila volumes over it unless force (the user said so on the review).
func detachRequest(sel workers.Selection, force, dryRun bool) workers.Request {
	return workers.Request{Selection: sel, Remove: &attach.Removal{}, Force: force, DryRun: dryRun, Rollout: &workers.Rollout{Later: true}}
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
	case quitMsg:
		return m.quitNow()

	case connectedMsg:
		if msg.seq != m.screens.connect.seq {
			return m, nil // an answer for a choice that has changed since
		}
		m, _ = m.dispatch(msg)
		if msg.err != nil {
			return m, nil
		}
		conn := msg.conn
		m.conn = &conn
		m.discovery, m.groups, m.groupsErr = nil, nil, ""
		m.screens.network = newNetworkModel()
		m.screens.sgs = waitingGroups(nil)
		// Everything the next screens need starts loading now, while the user reads.
		return m, tea.Batch(discoverCmd(m.ctx, m.opts.Backend), groupsCmd(m.ctx, m.opts.Backend))
	case discoveryMsg:
		m.discovery = msg.d
	case groupsMsg:
		if msg.err != nil {
			m.groupsErr = msg.err.Error()
		}
		m.groups = msg.groups
	case fixedMsg:
		for _, r := range msg.results {
			if r.err == nil {
				m.changed = append(m.changed, "subnet "+r.fix.subnet.Ref()+" ("+changeText(r.fix.update)+")")
			}
		}
		m, cmd := m.dispatch(msg)
		if msg.network != nil {
			// The network as Neutron now describes it, on the network screen too.
			m.discovery = m.screens.network.disc
		}
		return m, cmd
	case patchedMsg, rolloutStartedMsg, progressMsg, rolloutDoneMsg, clockMsg, followMsg, followPollMsg:
		m, cmd := m.dispatch(msg)
		if o := m.screens.apply.outcome(); o.Summary != "" {
			m.outcome = o
			if o.Applied && len(m.screens.review.fit.warnings) > 0 {
				m.outcome.Summary += " " + acknowledged(m.screens.review.fit)
			}
			if len(m.changed) > 0 {
				m.outcome.Summary += " " + m.changedNote()
			}
		}
		return m, cmd
	}
	return m.dispatch(msg)
}

// dispatch hands a result of work in the background to every screen: each takes its own.
func (m Model) dispatch(msg tea.Msg) (Model, tea.Cmd) {
	s := m.session()
	var cmds []tea.Cmd
	for step := range stepCount {
		cmds = append(cmds, m.screens.at(step).update(s, msg, step == m.step))
	}
	return m, tea.Batch(cmds...)
}

// key handles the keys every screen shares, unless the current screen takes them now, then
// hands the others to the screen.
func (m Model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	if m.help {
		m.help = false // any key closes the help
		if key.Matches(k, keyCtrlC) {
			return m.key(k)
		}
		return m, nil
	}
	s := m.session()
	cur := m.screens.at(m.step)
	switch g := cur.grabs(s); {
	case g == grabAll, g == grabQuit && key.Matches(k, keyQuit):
	case g == grabTyping && key.Matches(k, keyCtrlC), g == grabNone && key.Matches(k, keyQuit):
		return m.quitNow()
	case g != grabTyping && key.Matches(k, keyHelp):
		m.help = true // the screen's work goes on underneath
		return m, nil
	}
	return m, cur.key(s, k)
}

// quitNow ends the wizard, saying what was (not) changed unless a screen already said more.
func (m Model) quitNow() (tea.Model, tea.Cmd) {
	m.quit = true
	if m.outcome.Summary == "" {
		m.outcome.Summary = m.quitSummary()
	}
	return m, tea.Quit
}

// navigate leaves the current screen forwards or backwards; going forwards, the next screen
// takes the choices made so far.
func (m Model) navigate(d int) (tea.Model, tea.Cmd) {
	if d < 0 {
		if m.step == stepConnect || m.step >= stepApply {
			return m, nil // after applying there is no going back
		}
		m.step--
		return m, nil
	}
	if m.step+1 >= stepCount {
		return m, nil
	}
	cmd := m.screens.at(m.step + 1).enter(m.session())
	m.step++
	return m, cmd
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

// session is what the screens are given now; its height is what is left for the screen under
// the title and its rule and over the rule and the key lines (one, or more at narrow widths).
func (m Model) session() *session {
	s := &session{ctx: m.ctx, opts: m.opts, width: max(m.width, 20), spin: m.spin.View(),
		conn: m.conn, discovery: m.discovery, groups: m.groups, groupsErr: m.groupsErr, screens: m.screens}
	s.height = max(max(m.height, 6)-3-len(hintLines(m.keys(s), s.width)), 2)
	return s
}

// keys are the current screen's keys, then those of the wizard in force.
func (m Model) keys(s *session) []key.Binding {
	cur := m.screens.at(m.step)
	return append(cur.keys(s), wizardKeys(cur.grabs(s))...)
}

// View draws the current screen: a title line, the screen, and a line of keys.
func (m Model) View() string {
	if m.quit {
		return ""
	}
	s := m.session()
	cur := m.screens.at(m.step)
	w := s.width
	title := fmt.Sprintf("manila-setup networks attach · %d/%d %s", int(m.step)+1, stepCount, cur.title(s))
	if m.opts.DryRun {
		title += " · dry run"
	}
	var body []string
	keys := m.keys(s)
	if m.help {
		body = helpView(cur.title(s), cur.help(s), keys, w)
	} else {
		body = cur.view(s)
	}
	var b strings.Builder
	lines := append([]string{styleTitle.Render(cut(title, w)), styleDim.Render(strings.Repeat("─", w))}, fit(body, w, s.height)...)
	lines = append(lines, styleDim.Render(strings.Repeat("─", w)))
	lines = append(lines, hintLines(keys, w)...)
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}

func helpView(title, text string, keys []key.Binding, w int) []string {
	lines := []string{styleTitle.Render("Help: " + title), ""}
	lines = append(lines, wrap(text, w-2)...)
	lines = append(lines, "", styleTitle.Render("Keys"))
	lines = append(lines, helpKeys(keys)...)
	return append(lines, "", styleDim.Render("Any key closes this help."))
}
