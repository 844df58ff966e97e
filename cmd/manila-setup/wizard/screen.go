package wizard

import (
	"context"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/workers"
)

// screen is one step of the wizard, of type T. The model holds one of each (screens) and speaks
// to the current one only through these methods; every method gets the same session. key,
// update and enter return the screen as it is after them, of its own type, so that it goes
// back into its own field of screens and the others read it from there as it is.
type screen[T any] interface {
	// title names the screen in the title line and the help.
	title(s *session) string
	// help says what the screen is for.
	help(s *session) string
	// view draws the screen in s.width x s.height.
	view(s *session) []string
	// keys are the bindings the screen answers now, in the order of the key line; the
	// wizard's own keys (wizardKeys) follow them.
	keys(s *session) []key.Binding
	// grabs says which of the wizard's own keys the screen takes for itself now.
	grabs(s *session) grab
	// key handles a key that the wizard's own keys left to the screen.
	key(s *session, k tea.KeyMsg) (T, tea.Cmd)
	// update takes the result of work in the background; shown: the screen is the current one.
	update(s *session, msg tea.Msg, shown bool) (T, tea.Cmd)
	// enter makes the screen ready when it is reached going forwards, from the choices of the
	// screens before it (going back keeps a screen as it was).
	enter(s *session) (T, tea.Cmd)
}

// screens are the wizard's screens, one field per step, each of its own type: a screen reads
// the choices of an earlier one from its field (session.screens), with no type assertion, and
// the model speaks to the screen of a step through at.
type screens struct {
	connect connectModel
	network networkModel
	sgs     groupsModel
	sets    setsModel
	review  reviewModel
	apply   applyModel
	verify  verifyModel
}

// stepScreen is the screen of one step as the model speaks to it, whatever its type: key,
// update and enter store the screen they return back into its field.
type stepScreen interface {
	title(s *session) string
	help(s *session) string
	view(s *session) []string
	keys(s *session) []key.Binding
	grabs(s *session) grab
	key(s *session, k tea.KeyMsg) tea.Cmd
	update(s *session, msg tea.Msg, shown bool) tea.Cmd
	enter(s *session) tea.Cmd
}

// slot is a field of screens as a stepScreen.
type slot[T screen[T]] struct{ p *T }

func (x slot[T]) title(s *session) string       { return (*x.p).title(s) }
func (x slot[T]) help(s *session) string        { return (*x.p).help(s) }
func (x slot[T]) view(s *session) []string      { return (*x.p).view(s) }
func (x slot[T]) keys(s *session) []key.Binding { return (*x.p).keys(s) }
func (x slot[T]) grabs(s *session) grab         { return (*x.p).grabs(s) }

func (x slot[T]) key(s *session, k tea.KeyMsg) (cmd tea.Cmd) {
	*x.p, cmd = (*x.p).key(s, k)
	return cmd
}

func (x slot[T]) update(s *session, msg tea.Msg, shown bool) (cmd tea.Cmd) {
	*x.p, cmd = (*x.p).update(s, msg, shown)
	return cmd
}

func (x slot[T]) enter(s *session) (cmd tea.Cmd) {
	*x.p, cmd = (*x.p).enter(s)
	return cmd
}

// slots are the steps' fields, in the order of the steps: the one place that knows which
// screen a step has.
var slots = [stepCount]func(*screens) stepScreen{
	stepConnect: func(sc *screens) stepScreen { return slot[connectModel]{&sc.connect} },
	stepNetwork: func(sc *screens) stepScreen { return slot[networkModel]{&sc.network} },
	stepGroups:  func(sc *screens) stepScreen { return slot[groupsModel]{&sc.sgs} },
	stepSets:    func(sc *screens) stepScreen { return slot[setsModel]{&sc.sets} },
	stepReview:  func(sc *screens) stepScreen { return slot[reviewModel]{&sc.review} },
	stepApply:   func(sc *screens) stepScreen { return slot[applyModel]{&sc.apply} },
	stepVerify:  func(sc *screens) stepScreen { return slot[verifyModel]{&sc.verify} },
}

// at is the screen of step, whose key, update and enter change sc.
func (sc *screens) at(step stepID) stepScreen { return slots[step](sc) }

// session is what every screen is given: the wizard's options, the room the screen has, and what
// was read of the cloud and the cluster and chosen so far. Styles are the package's (styles.go):
// they never change while the wizard runs.
type session struct {
	ctx  context.Context
	opts Options
	// width and height are the body's, between the title and the key line.
	width, height int
	// spin is the spinner's current frame.
	spin string

	conn      *Connection
	discovery *openstack.Discovery
	groups    []openstack.SecurityGroup
	groupsErr string

	// screens are the screens as they were when the session was made, for the choices of the
	// earlier ones.
	screens screens
}

// fixedWords gives a screen whose title and help do not change with the cluster those of its
// step.
type fixedWords stepID

func (f fixedWords) title(*session) string { return stepTitles[f] }
func (f fixedWords) help(*session) string  { return helpText[f] }

// backend is the wizard's Backend.
func (s *session) backend() Backend { return s.opts.Backend }

// offered are the kinds the cluster has to choose from, as the sets screen read them (the
// control plane among them where it has a ControlPlaneMachineSet).
func (s *session) offered() workers.Kinds { return s.screens.sets.offered(s.conn) }

// attachment is what the screens so far chose.
func (s *session) attachment() attach.Attachment {
	a := attach.Attachment{}
	if n := s.screens.network.chosen(); n != nil {
		a.Networks = []string{n.ID}
	}
	a.SecurityGroups = s.screens.sgs.chosen()
	return a
}
