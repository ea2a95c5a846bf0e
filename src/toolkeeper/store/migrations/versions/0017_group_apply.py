"""PostgreSQL: a group commit batch in one statement (``toolkeeper_group_apply``)

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-29

``toolkeeper_group_apply(batch json)`` (``toolkeeper.store.pg_batch``) writes a batch of
claims and finishes, their side effects and their audit events, already chained by the
caller from the chain heads it last wrote, and moves those heads only where they still are
what the caller saw (seq, hash, base and MAC). A head that moved (returned: where it is
now) or a key already taken is refused before anything is written; one taken or moved
meanwhile raises, so nothing is written either. The caller then chains again and retries,
or falls back to the batch's usual transaction, which locks the heads. One round trip
per batch (in autocommit) instead of about six. SQLite: nothing (its batches are local and
cheap already).
"""

from __future__ import annotations

from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None

HEAD = """json_build_object('k', a.tenant_key, 'seq', a.seq, 'hash', a.hash, 'mac', a.mac,
                             'base_seq', a.base_seq, 'base_hash', a.base_hash)"""
FUNCTION = f"""
CREATE OR REPLACE FUNCTION toolkeeper_group_apply(batch json) RETURNS json
LANGUAGE plpgsql AS $fn$
DECLARE
    f json;
    o outcomes;
    h record;
    n bigint;
    moved json;
    done boolean[] := '{{}}';
BEGIN
    -- refused before anything is written (no error, nothing to roll back): a head that is
    -- no longer what the caller saw (it is returned), a key already taken; one index
    -- probe each (a join could be planned as a scan of the whole table)
    FOR h IN SELECT * FROM json_to_recordset(batch->'heads') AS x(
            k text, seq0 bigint, hash0 text, mac0 text, base_seq bigint, base_hash text) LOOP
        SELECT {HEAD} INTO moved FROM audit_heads a
            WHERE a.tenant_key = h.k AND (a.seq <> h.seq0 OR a.hash <> h.hash0
                OR a.base_seq <> h.base_seq OR a.base_hash IS DISTINCT FROM h.base_hash
                OR a.mac IS DISTINCT FROM h.mac0);
        IF moved IS NOT NULL THEN
            RETURN json_build_object('refused', 'head_moved', 'head', moved);
        END IF;
    END LOOP;
    FOR o IN SELECT * FROM json_populate_recordset(NULL::outcomes, batch->'claims') LOOP
        IF EXISTS (SELECT 1 FROM outcomes
                   WHERE tenant_id = o.tenant_id AND agent = o.agent AND key = o.key) THEN
            RETURN json_build_object('refused', 'claim_lost');
        END IF;
    END LOOP;
    -- claims, in key order: every one must win its key (else one was taken meanwhile)
    INSERT INTO outcomes
        SELECT * FROM json_populate_recordset(NULL::outcomes, batch->'claims')
        ON CONFLICT (tenant_id, agent, key) DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> json_array_length(batch->'claims') THEN
        RAISE EXCEPTION 'toolkeeper: a claim lost its key' USING ERRCODE = 'TK002';
    END IF;
    -- finishes, in arrival order: each one's side effect only if it finished the outcome
    FOR f IN SELECT * FROM json_array_elements(batch->'finishes') LOOP
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
    -- the chain heads, in tenant order, only where they still are what the caller saw
    -- (else another writer moved one meanwhile: where it is now, for the caller)
    FOR h IN SELECT * FROM json_to_recordset(batch->'heads') AS x(
            k text, seq0 bigint, hash0 text, mac0 text, base_seq bigint, base_hash text,
            seq bigint, hash text, mac text) LOOP
        UPDATE audit_heads SET seq = h.seq, hash = h.hash, mac = h.mac
            WHERE tenant_key = h.k AND seq = h.seq0 AND hash = h.hash0
              AND base_seq = h.base_seq AND base_hash IS NOT DISTINCT FROM h.base_hash
              AND mac IS NOT DISTINCT FROM h.mac0;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'toolkeeper: the audit chain head moved' USING ERRCODE = 'TK001',
                DETAIL = coalesce((SELECT {HEAD}::text FROM audit_heads a
                                   WHERE a.tenant_key = h.k), 'null');
        END IF;
    END LOOP;
    INSERT INTO audit_events
        SELECT * FROM json_populate_recordset(NULL::audit_events, batch->'events');
    RETURN json_build_object('done', done);
END
$fn$
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS toolkeeper_group_apply(json)")
