// Verifies Standard Webhooks messages with the reference library
// (npm standardwebhooks), independent of this project's signing code.
// stdin: {"secret": "whsec_...", "messages": [{"headers": {...}, "body": "..."}]}
// Prints "verified N" or exits 1 naming the first message that fails.
const { Webhook } = require("standardwebhooks");
let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const { secret, messages } = JSON.parse(input);
  const wh = new Webhook(secret);
  messages.forEach((m, i) => {
    try {
      wh.verify(m.body, m.headers);
    } catch (e) {
      console.error(`message ${i} (${m.headers["webhook-id"]}): ${e.message}`);
      process.exit(1);
    }
  });
  console.log(`verified ${messages.length}`);
});
