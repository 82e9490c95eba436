package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/berm-dev/berm/manifest"
	"github.com/berm-dev/berm/runtime/sandbox"
	"github.com/berm-dev/berm/runtime/store"
)

// Deploy records a deployment, replacing any under the same name at once
// (one upsert, which the trigger announces). The image must be stored first:
// the same statement checks it.
func (s *State) Deploy(d store.Deployment) error {
	if err := manifest.CheckProgramName(d.Name); err != nil {
		return err
	}
	if checkDigest(d.Digest) != nil {
		return fmt.Errorf("deploy %s: image %s: %w", d.Name, d.Digest, store.ErrNoImage)
	}
	if d.Deployed.IsZero() {
		d.Deployed = time.Now().UTC()
	}
	var grants []byte // NULL for none
	if d.Grants != nil {
		var err error
		if grants, err = json.Marshal(d.Grants); err != nil {
			return fmt.Errorf("deploy %s: %w", d.Name, err)
		}
	}
	var inserted int64
	// Not run again once sent (see do): another replica may have deployed
	// the name since.
	err := s.do(context.Background(), false, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `INSERT INTO berm_deployments (name, digest, source, grants, deployed)
			SELECT $1::text, $2::text, $3::text, $4::jsonb, $5::timestamptz
			WHERE EXISTS (SELECT 1 FROM berm_images WHERE digest = $2::text)
			ON CONFLICT (name) DO UPDATE SET digest = EXCLUDED.digest, source = EXCLUDED.source,
				grants = EXCLUDED.grants, deployed = EXCLUDED.deployed`,
			d.Name, d.Digest, d.Source, grants, d.Deployed)
		inserted = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("deploy %s: %w", d.Name, err)
	}
	if inserted == 0 {
		return fmt.Errorf("deploy %s: image %s: %w", d.Name, d.Digest, store.ErrNoImage)
	}
	return nil
}

const selectDeployments = `SELECT name, digest, source, grants, deployed FROM berm_deployments`

// row is a deployment as the table holds it, before it is checked.
type row struct {
	name, digest, source string
	grants               []byte
	deployed             time.Time
}

func (r *row) scan(rows pgx.Row) error {
	return rows.Scan(&r.name, &r.digest, &r.source, &r.grants, &r.deployed)
}

// deployment checks a row as the directory backend checks a record: a valid
// name, a valid digest, grants that read back. Anything else is ErrDamaged.
func (r *row) deployment() (store.Deployment, error) {
	if err := manifest.CheckProgramName(r.name); err != nil {
		return store.Deployment{}, fmt.Errorf("deployment row %q: %w: %w", r.name, store.ErrDamaged, err)
	}
	if err := checkDigest(r.digest); err != nil {
		return store.Deployment{}, fmt.Errorf("deployment %q: %w: %w", r.name, store.ErrDamaged, err)
	}
	d := store.Deployment{Name: r.name, Digest: r.digest, Source: r.source, Deployed: r.deployed.UTC()}
	if r.grants != nil {
		// A field this berm does not know may be a grant it would not
		// enforce: the row is refused, not read in part.
		var g *sandbox.Grants
		dec := json.NewDecoder(bytes.NewReader(r.grants))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			return store.Deployment{}, fmt.Errorf("deployment %q: grants: %w: %w", r.name, store.ErrDamaged, err)
		}
		d.Grants = g
	}
	return d, nil
}

// Deployment returns the deployment under name; a row that does not read
// back as a valid deployment is ErrDamaged.
func (s *State) Deployment(name string) (store.Deployment, error) {
	if err := manifest.CheckProgramName(name); err != nil {
		return store.Deployment{}, err
	}
	var r row
	err := s.do(context.Background(), true, func(ctx context.Context) error {
		return r.scan(s.pool.QueryRow(ctx, selectDeployments+` WHERE name = $1`, name))
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Deployment{}, fmt.Errorf("program %q: %w", name, store.ErrNotDeployed)
	}
	if err != nil {
		return store.Deployment{}, fmt.Errorf("deployment %q: %w", name, err)
	}
	return r.deployment()
}

// Deployments lists every deployment by name, and apart from them the rows
// that do not read back as one. The error is only for the database.
func (s *State) Deployments() ([]store.Deployment, []store.Damaged, error) {
	var rows []row
	err := s.do(context.Background(), true, func(ctx context.Context) error {
		rows = rows[:0]
		result, err := s.pool.Query(ctx, selectDeployments)
		if err != nil {
			return err
		}
		defer result.Close()
		for result.Next() {
			var r row
			if err := r.scan(result); err != nil {
				return err
			}
			rows = append(rows, r)
		}
		return result.Err()
	})
	if err != nil {
		return nil, nil, fmt.Errorf("deployments: %w", err)
	}
	out := []store.Deployment{}
	var damaged []store.Damaged
	for _, r := range rows {
		d, err := r.deployment()
		if err != nil {
			damaged = append(damaged, store.Damaged{Name: r.name, Err: err})
			continue
		}
		out = append(out, d)
	}
	// Sorted here, by bytes, as the directory backend sorts: the database's
	// collation may order names otherwise.
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	sort.Slice(damaged, func(i, j int) bool { return damaged[i].Name < damaged[j].Name })
	return out, damaged, nil
}

// Remove deletes the deployment under name and, unless keepData, its data, in
// one transaction (berm_remove).
func (s *State) Remove(name string, keepData bool) error {
	if err := manifest.CheckProgramName(name); err != nil {
		return err
	}
	var removed bool
	// Not idempotent: run again after a lost answer it could report a
	// removal of its own as ErrNotDeployed.
	err := s.do(context.Background(), false, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT berm_remove($1, $2)`, name, keepData).Scan(&removed)
	})
	if err != nil {
		return fmt.Errorf("remove %s: %w", name, err)
	}
	if !removed {
		return fmt.Errorf("program %q: %w", name, store.ErrNotDeployed)
	}
	return nil
}
