/**
 * A NATS server's `authorization` block with one user per agent of a run, each allowed to publish only its own
 * subjects of that run and the JetStream calls the exchange makes (create and read the run's stream and Object Store):
 * a partner's credential cannot store records under another agent's name, purge the stream or delete its messages.
 * Printed by `hacrl broker-users` and shown in docs/distributed.md.
 */

/** One agent's broker login. */
export interface AgentUser {
  agent: string;
  /** The password, a NATS bcrypt hash of it, or `$NAME`: a variable nats-server reads from its environment. */
  password: string;
}

/** The JetStream API subjects an agent of run `run` publishes to (NATS wildcards match whole tokens only). */
function jetStreamCalls(run: string): string[] {
  const stream = `HACRL_${run}`;
  const objects = `OBJ_hacrl_${run}`;
  return [
    '$JS.API.INFO',
    `$JS.API.STREAM.CREATE.${stream}`,
    `$JS.API.STREAM.INFO.${stream}`,
    `$JS.API.DIRECT.GET.${stream}`,
    `$JS.API.STREAM.CREATE.${objects}`,
    `$JS.API.STREAM.INFO.${objects}`,
    `$JS.API.STREAM.MSG.GET.${objects}`,
    `$JS.API.DIRECT.GET.${objects}`,
    `$JS.API.CONSUMER.CREATE.${objects}`,
    `$JS.API.CONSUMER.CREATE.${objects}.>`,
    `$JS.API.CONSUMER.DELETE.${objects}.*`,
    `$O.hacrl_${run}.>`,
    '_INBOX.>',
  ];
}

/** The `authorization` block for run `run` (its exchange.runId) and its agents' users, as nats-server reads it. */
export function brokerPermissions(run: string, users: readonly AgentUser[]): string {
  const entries = users.map((u) => {
    const own = ['step', 'manifest', 'leave'].map((channel) => `run.${run}.${channel}.*.agent.${u.agent}`);
    const allow = [...own, ...jetStreamCalls(run)];
    const list = allow.map((s) => `      ${JSON.stringify(s)}`).join(',\n');
    const password = u.password.startsWith('$') ? u.password : JSON.stringify(u.password);
    return `  { user: ${JSON.stringify(u.agent)}, password: ${password}, permissions: { publish: { allow: [\n${list}\n    ] } } }`;
  });
  return `authorization {\n users: [\n${entries.join('\n')}\n ]\n}\n`;
}
