-- Lumina A2A server, PostgreSQL backend: the tasks and push-notification configs of the
-- cluster profile (docs/a2a.md#the-cluster). Additive: instances of the previous release
-- never read or write these tables.
--
-- `owner` is the principal a task belongs to, `<tenant>/<subject>`: every query is keyed by
-- it, so another principal's task is simply absent. The task itself is its A2A JSON; the
-- run's progress is in the session journal. `updated_micros` orders `ListTasks` (newest
-- first) and grows with every save of an owner's tasks.
CREATE TABLE a2a_tasks (
    owner          TEXT   COLLATE "C" NOT NULL,
    id             TEXT   COLLATE "C" NOT NULL,
    context_id     TEXT   COLLATE "C" NOT NULL,
    updated_micros BIGINT NOT NULL,
    task           JSONB  NOT NULL,
    PRIMARY KEY (owner, id)
);

-- `ListTasks` by context; the next update time of an owner's tasks.
CREATE INDEX a2a_tasks_by_context ON a2a_tasks (owner, context_id);
CREATE INDEX a2a_tasks_by_update ON a2a_tasks (owner, updated_micros DESC);

-- A task's webhooks, oldest first (`seq`).
CREATE TABLE a2a_push_configs (
    owner   TEXT   COLLATE "C" NOT NULL,
    task_id TEXT   COLLATE "C" NOT NULL,
    id      TEXT   COLLATE "C" NOT NULL,
    seq     BIGSERIAL,
    config  JSONB  NOT NULL,
    PRIMARY KEY (owner, task_id, id)
);
