package mlx5_test

import (
	"testing"

	"github.com/goverbs/goverbs/internal/lifetest"
	"github.com/goverbs/goverbs/provider/mlx5/internal/model"
	"github.com/goverbs/goverbs/uverbs"
)

// TestHandleReuse runs the handle-reuse lifetime test on the device model
// (the rig runs it on the real kernel with rxe and siw).
func TestHandleReuse(t *testing.T) {
	d, dev := newModel(t, nil, model.Options{})
	ah := lidTo(d)
	lifetest.HandleReuse(t, dev, lifetest.Options{AH: &ah})
	_ = uverbs.ErrClosed
}
