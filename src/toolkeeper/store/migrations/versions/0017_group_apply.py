"""PostgreSQL: a group commit batch in one statement (``toolkeeper_group_apply``)

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29

``toolkeeper_group_apply(claims, finishes, heads, events)`` (JSON arrays each;
``toolkeeper.store.pg_batch``) writes a batch of claims and finishes, their side effects and
their audit events, already chained by the caller from the chain heads it last wrote, and
moves those heads only where they still are what the caller saw (seq, hash, base and MAC).
A head that moved (returned: where it is now) or a key already taken is refused, answered
rather than raised (the server logs no error): found before anything is written (no
transaction id: its commit flushes nothing), or, taken or moved meanwhile, its writes undone
(the block's subtransaction). Batches on one head wait for each other's commit on an
advisory lock taken before the check, so the second finds the head moved before writing. The caller then chains again and retries, or falls back to the
batch's usual transaction, which locks the heads. One round trip per batch (in autocommit)
instead of about six. Nothing probes a key before writing: on a new database (no
statistics yet) such a probe was planned as a scan of the tenant's outcomes, a plan kept
until the table's first analyze (the function's time 2-3x by 5,000 calls). SQLite: nothing
(its batches are local and cheap already).
"""

from __future__ import annotations

from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None

LOCK_CLASS = 0x746B6864
"""The advisory locks' first key (``tkhd``): one per chain head, the second key its hash."""
HEAD = """json_build_object('k', a.tenant_key, 'seq', a.seq, 'hash', a.hash, 'mac', a.mac,
                             'base_seq', a.base_seq, 'base_hash', a.base_hash)"""
FUNCTION = f"""
CREATE OR REPLACE FUNCTION toolkeeper_group_apply(claims json, finishes json, heads json,
                                                  events json) RETURNS json
LANGUAGE plpgsql AS $fn$
DECLARE
    f json;
    o outcomes;
    h record;
    n bigint;
    moved text;
    head json;
    done boolean[] := '{{}}';
BEGIN
    -- each head, in tenant order: held (an advisory lock, no write: these batches wait
    -- for each other's commit, not for a row) and refused if it moved, before writing
    -- (nothing to commit: no flush)
    FOR h IN SELECT * FROM json_to_recordset(heads) AS x(
            k text, seq0 bigint, hash0 text, mac0 text, base_seq bigint, base_hash text) LOOP
        PERFORM pg_advisory_xact_lock({LOCK_CLASS}, hashtext(h.k));
        SELECT {HEAD} INTO head FROM audit_heads a
            WHERE a.tenant_key = h.k AND (a.seq <> h.seq0 OR a.hash <> h.hash0
                OR a.base_seq <> h.base_seq OR a.base_hash IS DISTINCT FROM h.base_hash
                OR a.mac IS DISTINCT FROM h.mac0);
        IF head IS NOT NULL THEN
            RETURN json_build_object('refused', 'head_moved', 'head', head);
        END IF;
    END LOOP;
    -- every write in one block: a refusal undoes them all (its subtransaction) and is
    -- answered, not raised (no error in the server's log). No key probed before writing:
    -- on a table without statistics yet (a new database) a probe was planned as a scan of
    -- the tenant's outcomes (a key already taken writes nothing here either: skipped by
    -- the conflict check, no transaction id)
    BEGIN
        -- claims, in key order: every one must win its key (the unique index decides)
        INSERT INTO outcomes
            SELECT * FROM json_populate_recordset(NULL::outcomes, claims)
            ON CONFLICT (tenant_id, agent, key) DO NOTHING;
        GET DIAGNOSTICS n = ROW_COUNT;
        IF n <> json_array_length(claims) THEN
            RAISE EXCEPTION USING ERRCODE = 'TK002';
        END IF;
        -- finishes, in arrival order: each one's side effect only if it finished the outcome
        FOR f IN SELECT * FROM json_array_elements(finishes) LOOP
            o := json_populate_record(NULL::outcomes, f);
            UPDATE outcomes SET state = o.state, status = o.status, reason = o.reason,
                                result = o.result, updated_at = o.updated_at
                WHERE call_id = o.call_id AND state = 'in_progress';
            done := done || FOUND;
            IF FOUND AND json_typeof(f->'effect') = 'object' THEN
                INSERT INTO side_effects
                    SELECT * FROM json_populate_record(NULL::side_effects, f->'effect');
            END IF;
        END LOOP;
        -- the chain heads, in tenant order (as the usual path locks them), only where they
        -- still are what the caller saw
        FOR h IN SELECT * FROM json_to_recordset(heads) AS x(
                k text, seq0 bigint, hash0 text, mac0 text, base_seq bigint, base_hash text,
                seq bigint, hash text, mac text) LOOP
            UPDATE audit_heads SET seq = h.seq, hash = h.hash, mac = h.mac
                WHERE tenant_key = h.k AND seq = h.seq0 AND hash = h.hash0
                  AND base_seq = h.base_seq AND base_hash IS NOT DISTINCT FROM h.base_hash
                  AND mac IS NOT DISTINCT FROM h.mac0;
            IF NOT FOUND THEN
                moved := h.k;
                RAISE EXCEPTION USING ERRCODE = 'TK001';
            END IF;
        END LOOP;
        INSERT INTO audit_events
            SELECT * FROM json_populate_recordset(NULL::audit_events, events);
    EXCEPTION
        WHEN SQLSTATE 'TK002' THEN
            RETURN json_build_object('refused', 'claim_lost');
        WHEN SQLSTATE 'TK001' THEN  -- where it is now, for the caller to chain onto
            RETURN json_build_object('refused', 'head_moved', 'head',
                                     (SELECT {HEAD} FROM audit_heads a
                                      WHERE a.tenant_key = moved));
    END;
    RETURN json_build_object('done', done);
END
$fn$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS toolkeeper_group_apply(json, json, json, json)")
