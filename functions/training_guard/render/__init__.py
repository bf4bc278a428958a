"""Every channel's words and pictures: SNS and e-mail, Q Developer, Slack, the digest."""
