package wizard

import (
	"context"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/workers"
)

// screen is one step of the wizard. The model holds one per step and speaks to the current one
// only through these methods; every method gets the same session.
type screen interface {
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
	key(s *session, k tea.KeyMsg) (screen, tea.Cmd)
	// update takes the result of work in the background; shown: the screen is the current one.
	update(s *session, msg tea.Msg, shown bool) (screen, tea.Cmd)
	// enter makes the screen ready when it is reached going forwards, from the choices of the
	// screens before it (going back keeps a screen as it was).
	enter(s *session) (screen, tea.Cmd)
}

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

	screens [stepCount]screen
}

// fixedWords gives a screen whose title and help do not change with the cluster those of its
// step.
type fixedWords stepID

func (f fixedWords) title(*session) string { return stepTitles[f] }
func (f fixedWords) help(*session) string  { return helpText[f] }

// backend is the wizard's Backend.
func (s *session) backend() Backend { return s.opts.Backend }

// The screens as they are now, for the choices of the earlier ones.
func (s *session) network() networkModel { return s.screens[stepNetwork].(networkModel) }
func (s *session) sgs() groupsModel      { return s.screens[stepGroups].(groupsModel) }
func (s *session) sets() setsModel       { return s.screens[stepSets].(setsModel) }
func (s *session) review() reviewModel   { return s.screens[stepReview].(reviewModel) }
func (s *session) apply() applyModel     { return s.screens[stepApply].(applyModel) }

// offered are the kinds the cluster has to choose from, as the sets screen read them (the
// control plane among them where it has a ControlPlaneMachineSet).
func (s *session) offered() workers.Kinds { return s.sets().offered(s.conn) }

// attachment is what the screens so far chose.
func (s *session) attachment() attach.Attachment {
	a := attach.Attachment{}
	if n := s.network().chosen(); n != nil {
		a.Networks = []string{n.ID}
	}
	a.SecurityGroups = s.sgs().chosen()
	return a
}
